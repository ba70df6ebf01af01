package seccomp

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// mustCacheLoad loads path through c, checks the outcome, the bytes
// against fresh, and whether anything was parsed.
func mustCacheLoad(t *testing.T, c fileCache, path string, want cacheOutcome, fresh []byte) *Program {
	t.Helper()
	before := parses.Load()
	prog, got, err := c.load(path)
	if err != nil {
		t.Fatalf("fileCache.load(%q): %v", path, err)
	}
	if got != want {
		t.Errorf("fileCache.load(%q): outcome %d, want %d", path, got, want)
	}
	if parsed := parses.Load() - before; (want == cacheRawHit) != (parsed == 0) {
		t.Errorf("fileCache.load(%q) with outcome %d parsed %d times", path, got, parsed)
	}
	if !bytes.Equal(prog.Raw, fresh) {
		t.Errorf("fileCache.load(%q): %d bytes differ from a fresh compile's %d", path, len(prog.Raw), len(fresh))
	}
	return prog
}

// fixedBuildID is a build ID source for tests.
func fixedBuildID(id string) func() (string, error) {
	return func() (string, error) { return id, nil }
}

// writeProfile writes data as a profile file and returns its path.
func writeProfile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyBuiltin writes the built-in profile name to a file, as a user would
// copy it to start their own, and returns its path.
func copyBuiltin(t testing.TB, name string) string {
	t.Helper()
	data, err := seccompprofiles.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return writeProfile(t, data)
}

// TestCacheLoadHit checks that the second load of the same bytes parses
// nothing and returns what a fresh compile does, with the same Program
// fields as the parsed path.
func TestCacheLoadHit(t *testing.T) {
	if _, err := buildID(); err != nil {
		t.Fatalf("this test binary's build ID: %v", err)
	}
	for _, name := range []string{"default", "strict"} {
		t.Run(name, func(t *testing.T) {
			path := copyBuiltin(t, name)
			p := mustLoad(t, path)
			fresh := compileFresh(t, p)
			c := fileCache{dir: filepath.Join(t.TempDir(), "cache", "seccomp")}
			first := mustCacheLoad(t, c, path, cacheStored, fresh)
			hit := mustCacheLoad(t, c, path, cacheRawHit, fresh)
			hit2 := mustCacheLoad(t, c, path, cacheRawHit, fresh)
			for _, prog := range []*Program{first, hit, hit2} {
				if prog.Profile != p.Name || prog.SHA256 != p.SHA256 || prog.Arch != first.Arch || prog.Arch == "" {
					t.Errorf("program %q %s %q, want %q %s %q", prog.Profile, prog.SHA256, prog.Arch, p.Name, p.SHA256, first.Arch)
				}
			}
			// One plan-keyed entry and one bytes-keyed entry.
			if entries, _ := os.ReadDir(c.dir); len(entries) != 2 {
				t.Errorf("cache dir holds %v, want two entries", entries)
			}
		})
	}
}

// TestCacheLoadFileChange checks that a one-byte change to a profile file
// (a trailing newline) misses the first level, parses, and is answered by
// the plan-keyed entry the first version stored; that the first version
// still hits the first level; and that the same bytes at another path
// have their own first-level entry.
func TestCacheLoadFileChange(t *testing.T) {
	path := copyBuiltin(t, "default")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fresh := compileFresh(t, mustLoad(t, path))
	c := fileCache{dir: t.TempDir()}
	mustCacheLoad(t, c, path, cacheStored, fresh)
	mustCacheLoad(t, c, path, cacheRawHit, fresh)
	if err := os.WriteFile(path, append(bytes.Clone(data), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := mustCacheLoad(t, c, path, cacheHit, fresh)
	mustCacheLoad(t, c, path, cacheRawHit, fresh)
	if want := mustLoad(t, path).SHA256; changed.SHA256 != want {
		t.Errorf("SHA256 %s, want the changed file's %s", changed.SHA256, want)
	}
	other := writeProfile(t, data)
	mustCacheLoad(t, c, other, cacheHit, fresh)
	mustCacheLoad(t, c, other, cacheRawHit, fresh)
}

// TestCacheLoadBadProfile checks that a profile that does not parse gets
// the same ProfileError on every call, Load's, and leaves nothing behind;
// that refusals before parsing are Load's too; and that a built-in
// profile never reaches the cache.
func TestCacheLoadBadProfile(t *testing.T) {
	path := writeProfile(t, []byte("{\n  \"defaultAction\": \"SCMP_ACT_ERRNO\",\n  \"architectures\": [\"SCMP_ARCH_X86_64\"],\n  \"syscalls\": [\n    {\"names\": [\"no_such_syscall\"], \"action\": \"SCMP_ACT_ALLOW\"}\n  ]\n}\n"))
	_, want := Load(path)
	var wantPE *ProfileError
	if !errors.As(want, &wantPE) || wantPE.Line != 5 || wantPE.Source != path {
		t.Fatalf("Load: %v, want a *ProfileError at %s:5", want, path)
	}
	c := fileCache{dir: t.TempDir()}
	for i := range 3 {
		before := parses.Load()
		_, _, err := c.load(path)
		var pe *ProfileError
		if !errors.As(err, &pe) || err.Error() != want.Error() {
			t.Errorf("call %d: %v, want %v", i, err, want)
		}
		if parses.Load() == before {
			t.Errorf("call %d: nothing parsed", i)
		}
	}
	if entries, _ := os.ReadDir(c.dir); len(entries) != 0 {
		t.Errorf("cache dir holds %v after a bad profile", entries)
	}

	for _, name := range []string{"profile.json", "./default", filepath.Join(t.TempDir(), "missing.json"), t.TempDir()} {
		_, want := Load(name)
		_, _, err := c.load(name)
		if want == nil || err == nil || err.Error() != want.Error() {
			t.Errorf("Load(%q): %v, fileCache.load: %v; want the same error", name, want, err)
		}
	}
	if _, _, err := c.load("default"); err == nil || !strings.Contains(err.Error(), "bug: built-in") {
		t.Errorf("fileCache.load(\"default\"): %v, want a bug error", err)
	}
	if entries, _ := os.ReadDir(c.dir); len(entries) != 0 {
		t.Errorf("cache dir holds %v", entries)
	}
}

// TestCacheLoadBuildID checks that the build ID is part of the key: another
// binary's entries are not used (parse, then the plan-keyed entry), and a
// binary without a readable build ID parses every time and stores no
// bytes-keyed entry.
func TestCacheLoadBuildID(t *testing.T) {
	path := copyBuiltin(t, "default")
	fresh := compileFresh(t, mustLoad(t, path))
	c := fileCache{dir: t.TempDir(), buildID: fixedBuildID("a/b/c/d")}
	mustCacheLoad(t, c, path, cacheStored, fresh)
	mustCacheLoad(t, c, path, cacheRawHit, fresh)

	src, err := readSource(path)
	if err != nil {
		t.Fatal(err)
	}
	keyA, _ := c.rawKey(src, [32]byte{})
	c.buildID = fixedBuildID("a/b/c/e")
	keyE, _ := c.rawKey(src, [32]byte{})
	if keyA == keyE {
		t.Errorf("rawKey is the same for two build IDs")
	}
	mustCacheLoad(t, c, path, cacheHit, fresh)
	mustCacheLoad(t, c, path, cacheRawHit, fresh)

	dir := t.TempDir()
	for _, broken := range []func() (string, error){
		func() (string, error) { return "", errors.New("no build id") },
		fixedBuildID(""),
	} {
		c := fileCache{dir: dir, buildID: broken}
		mustCacheLoad(t, c, path, cacheStored, fresh)
		mustCacheLoad(t, c, path, cacheHit, fresh)
		mustCacheLoad(t, c, path, cacheHit, fresh)
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("cache dir holds %v, want only the plan-keyed entry", entries)
		}
		os.RemoveAll(dir)
	}
}

// TestReadBuildID checks the note parsing against `go tool buildid` on
// this test binary, and that a file without the note is an error.
func TestReadBuildID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got, err := readBuildID(exe)
	if err != nil {
		t.Fatalf("readBuildID(%s): %v", exe, err)
	}
	if self, err := buildID(); err != nil || self != got {
		t.Errorf("buildID() = %q, %v; want %q", self, err, got)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		if mustWork() {
			t.Fatalf("go tool buildid: %v", err)
		}
		t.Logf("go tool buildid: %v; checked the note's shape only", err)
	} else if want := strings.TrimSpace(string(out)); got != want {
		t.Errorf("readBuildID = %q, go tool buildid = %q", got, want)
	}
	for _, path := range []string{writeProfile(t, []byte("{}")), filepath.Join(t.TempDir(), "missing")} {
		if id, err := readBuildID(path); err == nil {
			t.Errorf("readBuildID(%s) = %q, want an error", path, id)
		}
	}
}
