package rootfs_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/rootfs-builder/build"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

const hostPython = "/usr/bin/python3.11"

var (
	scratch  string // removed after the tests
	baseOnce sync.Once
	baseDir  string
	baseErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nsbox-rootfs-test-")
	if err != nil {
		panic(err)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// baseRoot builds a stdlib-only root once for the package. Building needs
// root (every file of a root is owned by root) and the host interpreter.
func baseRoot(tb testing.TB) string {
	tb.Helper()
	mustwork.NeedRoot(tb)
	mustwork.NeedPath(tb, hostPython)
	baseOnce.Do(func() {
		baseDir = filepath.Join(scratch, "base")
		_, baseErr = build.Build(context.Background(), build.Options{Python: hostPython, Out: baseDir, Version: "test"})
	})
	if baseErr != nil {
		tb.Fatalf("build base root: %v", baseErr)
	}
	return baseDir
}

// cloneRoot copies the base root, so a test can damage its copy.
func cloneRoot(t *testing.T) string {
	t.Helper()
	src := baseRoot(t)
	dst := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	return dst
}

// TestTamperReal damages a real root in the ways the brief lists, one at
// a time, and checks what Check and Verify say; each damage is undone
// before the next.
func TestTamperReal(t *testing.T) {
	dir := cloneRoot(t)
	in := func(p string) string { return filepath.Join(dir, p) }
	appendByte := func(p string) func() {
		orig, err := os.ReadFile(in(p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(in(p), append(slices.Clone(orig), '#'), 0); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := os.WriteFile(in(p), orig, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	pyc := "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc"
	for _, tc := range []struct {
		name          string
		damage        func() (undo func())
		checkFails    string // "" when Check must still pass; else the path it names
		missing       []string
		modified      []string
		extra         []string
		checkMismatch bool
	}{
		{name: "append to a stdlib module", damage: func() func() { return appendByte("/usr/lib/python3.11/json/decoder.py") },
			modified: []string{"/usr/lib/python3.11/json/decoder.py"}},
		{name: "remove a stdlib module", damage: func() func() {
			p := "/usr/lib/python3.11/csv.py"
			orig, _ := os.ReadFile(in(p))
			if err := os.Remove(in(p)); err != nil {
				t.Fatal(err)
			}
			return func() { os.WriteFile(in(p), orig, 0o644); os.Chmod(in(p), 0o644) }
		}, missing: []string{"/usr/lib/python3.11/csv.py"}},
		{name: "add a file", damage: func() func() {
			p := in("/usr/lib/python3.11/evil.py")
			if err := os.WriteFile(p, []byte("import os\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p) }
		}, extra: []string{"/usr/lib/python3.11/evil.py"}},
		{name: "add a shell", damage: func() func() {
			p := in("/usr/bin/sh")
			if err := os.WriteFile(p, []byte("\x7fELF"), 0o755); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p) }
		}, extra: []string{"/usr/bin/sh"}},
		{name: "append to os.py (critical)", damage: func() func() { return appendByte("/usr/lib/python3.11/os.py") },
			checkFails: "/usr/lib/python3.11/os.py", modified: []string{"/usr/lib/python3.11/os.py"}},
		{name: "append to os's pyc (critical)", damage: func() func() { return appendByte(pyc) },
			checkFails: pyc, modified: []string{pyc}},
		{name: "append to libc (critical)", damage: func() func() { return appendByte("/usr/lib/x86_64-linux-gnu/libc.so.6") },
			checkFails: "/usr/lib/x86_64-linux-gnu/libc.so.6", modified: []string{"/usr/lib/x86_64-linux-gnu/libc.so.6"}},
		{name: "setuid interpreter (critical)", damage: func() func() {
			p := in("/usr/bin/python3.11")
			if err := os.Chmod(p, 0o755|os.ModeSetuid); err != nil {
				t.Fatal(err)
			}
			return func() { os.Chmod(p, 0o755) }
		}, checkFails: "/usr/bin/python3.11", modified: []string{"/usr/bin/python3.11"}},
		{name: "edit manifest.json", damage: func() func() {
			p := in("/.nsbox/manifest.json")
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(orig), `"nsbox_version":"test"`, `"nsbox_version":"tesT"`, 1)
			if err := os.WriteFile(p, []byte(edited), 0); err != nil {
				t.Fatal(err)
			}
			return func() { os.WriteFile(p, orig, 0) }
		},
			checkFails: "manifest.json", modified: []string{"/.nsbox/manifest.json"}},
		{name: "lock file in a stdlib-only root", damage: func() func() {
			p := in("/.nsbox/lock.txt")
			if err := os.WriteFile(p, []byte("six==1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p) }
		}, extra: []string{"/.nsbox/lock.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			undo := tc.damage()
			_, err := rootfs.Check(dir)
			switch {
			case tc.checkFails == "" && err != nil:
				t.Errorf("Check: %v, want it to pass (not a critical file)", err)
			case tc.checkFails != "" && (err == nil || !strings.Contains(err.Error(), tc.checkFails) || !strings.Contains(err.Error(), dir)):
				t.Errorf("Check: %v, want an error naming %s and the root", err, tc.checkFails)
			case tc.checkFails != "" && !errors.Is(err, rootfs.ErrMismatch):
				t.Errorf("Check: %v does not wrap ErrMismatch", err)
			}
			r, err := rootfs.Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []struct {
				what      string
				got, want []string
			}{{"missing", r.Missing, tc.missing}, {"modified", r.Modified, tc.modified}, {"extra", r.Extra, tc.extra}} {
				if !slices.Equal(g.got, g.want) {
					t.Errorf("%s: %v, want %v", g.what, g.got, g.want)
				}
			}
			undo()
			if r, err := rootfs.Verify(dir); err != nil || !r.OK() {
				t.Fatalf("after undoing: %+v, %v", r, err)
			}
		})
	}
}

// TestVerifyUnreadableManifest: a manifest that is not JSON cannot be
// verified against; Verify and Check both fail, naming it.
func TestVerifyUnreadableManifest(t *testing.T) {
	dir := cloneRoot(t)
	p := filepath.Join(dir, rootfs.MetaDir, rootfs.ManifestFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("#")
	f.Close()
	if _, err := rootfs.Verify(dir); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Verify: %v, want an error naming %s", err, p)
	}
	if _, err := rootfs.Check(dir); !errors.Is(err, rootfs.ErrMismatch) {
		t.Errorf("Check: %v, want a mismatch", err)
	}
}

// TestCheckCost: Check runs before every run and must stay cheap (the
// aim is well under a millisecond; the bound here only catches a
// regression to re-hashing everything).
func TestCheckCost(t *testing.T) {
	dir := baseRoot(t)
	var times []time.Duration
	for range 50 {
		start := time.Now()
		if _, err := rootfs.Check(dir); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fi, err := os.Stat(filepath.Join(dir, rootfs.MetaDir, rootfs.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Check: median %v, min %v (manifest.json %d bytes)", times[len(times)/2], times[0], fi.Size())
	if times[len(times)/2] > 20*time.Millisecond {
		t.Errorf("Check median %v", times[len(times)/2])
	}
}

func BenchmarkCheck(b *testing.B) {
	dir := baseRoot(b)
	for b.Loop() {
		if _, err := rootfs.Check(dir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	dir := baseRoot(b)
	for b.Loop() {
		if r, err := rootfs.Verify(dir); err != nil || !r.OK() {
			b.Fatal(r, err)
		}
	}
}
