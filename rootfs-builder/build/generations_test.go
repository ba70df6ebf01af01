package build

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// build builds the stdlib-only root at out and returns its generation.
func build(t *testing.T, out string) string {
	t.Helper()
	if _, err := Build(context.Background(), Options{Python: hostPython, Out: out}); err != nil {
		t.Fatal(err)
	}
	gen, err := rootfs.Resolve(out)
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// verified fails the test unless the root at dir matches its manifest.
func verified(t *testing.T, dir string) {
	t.Helper()
	if r, err := rootfs.Verify(dir); err != nil || !r.OK() {
		t.Errorf("%s does not verify: %+v, %v", dir, r, err)
	}
}

// TestHeldGenerationKept: a rebuild switches the root to a new generation
// and keeps the one a run holds, intact, until the run lets go; then a
// sweep removes it and its lock.
func TestHeldGenerationKept(t *testing.T) {
	needBuildHost(t)
	out := filepath.Join(t.TempDir(), "base")
	first := build(t, out)
	held, err := rootfs.Hold(out)
	if err != nil || held.Dir != first {
		t.Fatalf("Hold = %+v, %v; want %s", held, err, first)
	}

	var got Result
	rep := doneAt{Reporter: NewQuietReporter(), done: &got}
	if _, err := Build(context.Background(), Options{Python: hostPython, Out: out, Progress: rep}); err != nil {
		t.Fatal(err)
	}
	second, _ := rootfs.Resolve(out)
	if second == first || got.Generation != second {
		t.Errorf("after the rebuild the root names %s (reported %s), the run holds %s", second, got.Generation, first)
	}
	if !slices.Equal(got.Kept, []string{first}) {
		t.Errorf("kept %v, want the held %s", got.Kept, first)
	}
	verified(t, first)
	verified(t, out)
	if kept, err := Sweep(context.Background(), out); err != nil || !slices.Equal(kept, []string{first}) {
		t.Errorf("Sweep while held: kept %v, %v", kept, err)
	}

	held.Close()
	if kept, err := Sweep(context.Background(), out); err != nil || len(kept) > 0 {
		t.Errorf("Sweep after the run: kept %v, %v", kept, err)
	}
	if exists(first) || exists(rootfs.GenerationLock(first)) {
		t.Errorf("%s or its lock is still there", first)
	}
	if left := siblings(t, out); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	verified(t, out)
}

// doneAt is a Reporter that records the result.
type doneAt struct {
	Reporter
	done *Result
}

func (d doneAt) Done(r Result) { *d.done = r }

// TestConvertLegacyRoot: a root an older nsbox built in place (a
// directory, no lock) becomes a generation by a rename, so what its runs
// have open or mounted stays; it is kept for rootfs.LegacyKeep, then
// swept.
func TestConvertLegacyRoot(t *testing.T) {
	needBuildHost(t)
	out := filepath.Join(t.TempDir(), "base")
	gen := build(t, out)
	// The older layout: the tree at out itself, no generation, no lock.
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(rootfs.GenerationLock(gen)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(gen, out); err != nil {
		t.Fatal(err)
	}
	// What a run of the older nsbox uses: its directories by identity.
	usr, err := os.Open(filepath.Join(out, "usr/lib/python3.11"))
	if err != nil {
		t.Fatal(err)
	}
	defer usr.Close()

	cur := build(t, out)
	if fi, err := os.Lstat(out); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("%s after the rebuild: %v, %v; want a symlink", out, fi, err)
	}
	legacy := siblings(t, out)
	if len(legacy) != 1 || !exists(filepath.Join(legacy[0], rootfs.MetaDir)) || exists(rootfs.GenerationLock(legacy[0])) {
		t.Fatalf("beside the new generation %s: %v, want the converted root without a lock", cur, legacy)
	}
	if names, err := usr.Readdirnames(0); err != nil || !slices.Contains(names, "os.py") {
		t.Errorf("the old tree, open by a run: %v, %v", len(names), err)
	}
	verified(t, legacy[0])

	// Young: kept, by every build and sweep, for rootfs.LegacyKeep.
	if kept, err := Sweep(context.Background(), out); err != nil || !slices.Equal(kept, legacy) {
		t.Errorf("Sweep: kept %v, %v; want %v", kept, err, legacy)
	}
	// A day and more later, it goes.
	unlock, err := lockOut(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := sweepGenerations(out, time.Now().Add(rootfs.LegacyKeep+time.Minute))
	unlock()
	if err != nil || len(kept) > 0 || exists(legacy[0]) {
		t.Errorf("sweep after LegacyKeep: kept %v, %v; %s exists: %v", kept, err, legacy[0], exists(legacy[0]))
	}
	if left := siblings(t, out); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	verified(t, out)
}

// TestEmptyDirectoryOut: an empty directory at out is replaced, not kept
// as a generation.
func TestEmptyDirectoryOut(t *testing.T) {
	needBuildHost(t)
	out := filepath.Join(t.TempDir(), "base")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	build(t, out)
	if left := siblings(t, out); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	verified(t, out)
}

// TestHalfGenerationNeverUsed: what a builder that died leaves (its build
// directory, a generation renamed into place but never switched to, a
// symlink not yet renamed over out, a generation half removed, the lock
// of a generation gone) is never what out names, and the next sweep
// removes all of it.
func TestHalfGenerationNeverUsed(t *testing.T) {
	needBuildHost(t)
	out := filepath.Join(t.TempDir(), "base")
	cur := build(t, out)
	half := rootfs.GenerationPath(out, rootfs.NewGenerationID(time.Now().Add(time.Second)))
	for _, d := range []string{out + ".tmp-x1", half, out + ".tmp-rm-x2"} {
		if err := os.MkdirAll(filepath.Join(d, "usr/lib"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{rootfs.GenerationLock(half), rootfs.GenerationLock(rootfs.GenerationPath(out, rootfs.NewGenerationID(time.Now())))} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(half), out+".tmp-link-x3"); err != nil {
		t.Fatal(err)
	}
	// A conversion's symlink, made under a generation name, never
	// exchanged.
	if err := os.Symlink(filepath.Base(half), rootfs.GenerationPath(out, rootfs.NewGenerationID(time.Now()))); err != nil {
		t.Fatal(err)
	}
	held, err := rootfs.Hold(out)
	if err != nil || held.Dir != cur {
		t.Fatalf("Hold = %+v, %v; want the complete %s", held, err, cur)
	}
	held.Close()
	if kept, err := Sweep(context.Background(), out); err != nil || len(kept) > 0 {
		t.Errorf("Sweep: kept %v, %v", kept, err)
	}
	if left := siblings(t, out); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	verified(t, out)
}
