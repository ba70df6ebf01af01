package seccomp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

func TestLoadFilterNone(t *testing.T) {
	if prog, err := LoadFilter("none", t.TempDir()); prog != nil || err != nil {
		t.Fatalf("LoadFilter(none) = %v, %v; want nil, nil", prog, err)
	}
}

// TestLoadFilterBuiltin checks that a built-in profile's filter is its
// golden, byte for byte what libseccomp compiles from the embedded JSON
// now (so the golden behaves as the compiled filter in every test that
// installs one), with the same Program fields, and that loading it parses
// nothing and touches no cache.
func TestLoadFilterBuiltin(t *testing.T) {
	for _, name := range seccompprofiles.Names() {
		t.Run(name, func(t *testing.T) {
			p := mustLoad(t, name)
			want, err := p.Compile()
			if err != nil {
				t.Fatal(err)
			}
			cacheDir := filepath.Join(t.TempDir(), "cache")
			before := parses.Load()
			prog, err := LoadFilter(name, cacheDir)
			if err != nil {
				t.Fatalf("LoadFilter(%q): %v", name, err)
			}
			if n := parses.Load() - before; n != 0 {
				t.Errorf("LoadFilter(%q) parsed %d times, want none", name, n)
			}
			if _, ok := seccompprofiles.Compiled(name); !ok {
				// gen's TestGoldens fails on such an architecture; here
				// LoadFilter compiled, which is checked below all the same.
				t.Logf("no golden for %s on this architecture", name)
			}
			if !bytes.Equal(prog.Raw, want.Raw) {
				t.Errorf("LoadFilter(%q): %d bytes differ from libseccomp's %d now: run `go generate ./seccomp-profiles`", name, len(prog.Raw), len(want.Raw))
			}
			if prog.Profile != want.Profile || prog.SHA256 != want.SHA256 || prog.Arch != want.Arch {
				t.Errorf("LoadFilter(%q) = %q %s %s, want %q %s %s", name, prog.Profile, prog.SHA256, prog.Arch, want.Profile, want.SHA256, want.Arch)
			}
			if _, err := os.Stat(cacheDir); !os.IsNotExist(err) {
				t.Errorf("LoadFilter(%q) touched the cache dir: %v", name, err)
			}
		})
	}
}

// TestLoadFilterNoGolden checks the architecture without goldens: the
// built-in profile is compiled at run time, never left unfiltered.
func TestLoadFilterNoGolden(t *testing.T) {
	none := func(string) (seccompprofiles.Filter, bool) { return seccompprofiles.Filter{}, false }
	want, err := mustLoad(t, "strict").Compile()
	if err != nil {
		t.Fatal(err)
	}
	before := parses.Load()
	prog, err := loadBuiltin("strict", none)
	if err != nil {
		t.Fatalf("loadBuiltin without a golden: %v", err)
	}
	if !bytes.Equal(prog.Raw, want.Raw) || prog.SHA256 != want.SHA256 || prog.Arch != want.Arch {
		t.Errorf("loadBuiltin without a golden: %d bytes %s %s, want a fresh compile's", len(prog.Raw), prog.SHA256, prog.Arch)
	}
	if parses.Load() == before {
		t.Errorf("loadBuiltin without a golden parsed nothing: it did not compile")
	}
}

// TestLoadFilterBadGolden checks that a golden is refused, with the fix,
// when it was compiled from another profile than the one embedded or is
// not a program the kernel takes.
func TestLoadFilterBadGolden(t *testing.T) {
	good, err := mustLoad(t, "default").Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(*seccompprofiles.Filter)
		want   string
	}{
		{"stale", func(f *seccompprofiles.Filter) { f.ProfileSHA256 = strings.Repeat("0", 64) }, "go generate ./seccomp-profiles"},
		{"empty", func(f *seccompprofiles.Filter) { f.BPF = nil }, "0 bytes"},
		{"torn", func(f *seccompprofiles.Filter) { f.BPF = f.BPF[:len(f.BPF)-1] }, "multiple of 8"},
		{"too long", func(f *seccompprofiles.Filter) { f.BPF = make([]byte, 8*(load.MaxInsns+1)) }, "instructions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := seccompprofiles.Filter{File: "default.test.bpf", Arch: string(good.Arch), ProfileSHA256: good.SHA256, BPF: bytes.Clone(good.Raw)}
			c.change(&f)
			prog, err := loadBuiltin("default", func(string) (seccompprofiles.Filter, bool) { return f, true })
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "seccomp-profiles/default.test.bpf") {
				t.Fatalf("loadBuiltin: %v, %v; want an error naming the golden and containing %q", prog, err, c.want)
			}
		})
	}
	// The unchanged stand-in is accepted: the refusals above are the
	// changes'.
	f := seccompprofiles.Filter{File: "default.test.bpf", Arch: string(good.Arch), ProfileSHA256: good.SHA256, BPF: bytes.Clone(good.Raw)}
	if _, err := loadBuiltin("default", func(string) (seccompprofiles.Filter, bool) { return f, true }); err != nil {
		t.Fatalf("loadBuiltin with a good stand-in: %v", err)
	}
}

// TestLoadFilterFile checks a user's profile: compiled with libseccomp,
// through the cache when there is a cache dir (the second run parses
// nothing) and without one otherwise; its problems are Load's.
func TestLoadFilterFile(t *testing.T) {
	path := copyBuiltin(t, "default")
	want, err := mustLoad(t, path).Compile()
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	for i, c := range []struct {
		cacheDir string
		parsed   bool
	}{{cacheDir, true}, {cacheDir, false}, {"", true}} {
		before := parses.Load()
		prog, err := LoadFilter(path, c.cacheDir)
		if err != nil {
			t.Fatalf("run %d: LoadFilter(%s, %q): %v", i, path, c.cacheDir, err)
		}
		if parsed := parses.Load() != before; parsed != c.parsed {
			t.Errorf("run %d: parsed %v, want %v", i, parsed, c.parsed)
		}
		if !bytes.Equal(prog.Raw, want.Raw) || prog.Profile != path || prog.SHA256 != want.SHA256 {
			t.Errorf("run %d: %q %s, %d bytes; want a fresh compile's", i, prog.Profile, prog.SHA256, len(prog.Raw))
		}
	}
	if entries, err := os.ReadDir(cacheDir); err != nil || len(entries) != 2 {
		t.Errorf("cache dir holds %v (%v), want the two entries of one profile", entries, err)
	}

	bad := writeProfile(t, []byte("{\n  \"defaultAction\": \"SCMP_ACT_NOPE\"\n}\n"))
	for _, dir := range []string{cacheDir, ""} {
		var pe *ProfileError
		if _, err := LoadFilter(bad, dir); !errors.As(err, &pe) || pe.Source != bad || pe.Line != 2 {
			t.Errorf("LoadFilter(bad, %q): %v, want a *ProfileError at %s:2", dir, err, bad)
		}
	}
	for _, name := range []string{"default.json", "./default", "", "None"} {
		_, want := Load(name)
		if _, err := LoadFilter(name, cacheDir); err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("LoadFilter(%q): %v, want Load's %v", name, err, want)
		}
	}
}
