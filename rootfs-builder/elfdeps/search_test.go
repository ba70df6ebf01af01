package elfdeps

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		in, origin, plat, want string
		ok                     bool
	}{
		{"/usr/lib", "/o", "x86_64", "/usr/lib", true},
		{"$ORIGIN", "/o/d", "", "/o/d", true},
		{"$ORIGIN/../lib", "/o/d", "", "/o/d/../lib", true},
		{"${ORIGIN}/lib:", "/o", "", "/o/lib:", true},
		{"/a/$ORIGIN/b", "/o", "", "/a//o/b", true},
		{"$ORIGIN$ORIGIN", "/o", "", "/o/o", true},
		{"$ORIGINAL/x", "/o", "", "$ORIGINAL/x", true}, // not a token: name continues
		{"${ORIGIN", "/o", "", "${ORIGIN", true},
		{"$FOO/$", "/o", "", "$FOO/$", true},
		{"/lib/$PLATFORM", "/o", "x86_64", "/lib/x86_64", true},
		{"/lib/${PLATFORM}/x", "/o", "aarch64", "/lib/aarch64/x", true},
		{"/lib/$PLATFORM", "/o", "", "", false},
		{"$ORIGIN", "", "", "", false},
		{"/usr/$LIB", "/o", "x86_64", "", false},
		{"/usr/${LIB}", "/o", "x86_64", "", false},
	} {
		got, ok := expand(tc.in, tc.origin, tc.plat)
		if got != tc.want || ok != tc.ok {
			t.Errorf("expand(%q, %q, %q) = %q, %v; want %q, %v", tc.in, tc.origin, tc.plat, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDirOf(t *testing.T) {
	for in, want := range map[string]string{"/a/b/../c/x.so": "/a/b/../c", "/x": "/", "x": ".", "a/x": "a"} {
		if got := dirOf(in); got != want {
			t.Errorf("dirOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadLdSoConf(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "# comment\n/first/ # trailing\ninclude conf.d/*.conf\n\nhwcap 0 nosegneg\n/legacy=libc6\n/first\ninclude /nonexistent/*.conf\n")
	write("conf.d/b.conf", "/b\n")
	write("conf.d/a.conf", "  /a  \ninclude ../loop.conf\n")
	write("loop.conf", "include conf.d/a.conf\n") // an include cycle must end
	write("conf.d/ignored.txt", "/ignored\n")
	got, err := readLdSoConf(filepath.Join(dir, "ld.so.conf"))
	if err == nil {
		t.Fatalf("include cycle: got %q, want an error", got)
	}

	write("loop.conf", "/loop\n")
	got, err = readLdSoConf(filepath.Join(dir, "ld.so.conf"))
	want := []string{"/first", "/a", "/loop", "/b", "/legacy"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if got, err := readLdSoConf(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("missing file: got %q, %v", got, err)
	}
}

func TestDefaultDirs(t *testing.T) {
	got := defaultDirs(elf.ELFCLASS64, elf.EM_X86_64)
	want := []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	if !slices.Equal(got, want) {
		t.Errorf("x86_64: got %q", got)
	}
	if got := defaultDirs(elf.ELFCLASS64, elf.EM_AARCH64); got[0] != "/lib/aarch64-linux-gnu" {
		t.Errorf("aarch64: got %q", got)
	}
}
