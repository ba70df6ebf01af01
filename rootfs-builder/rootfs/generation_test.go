package rootfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// newGeneration makes an empty generation of the root at dir, with its
// lock file, and returns its path.
func newGeneration(t *testing.T, dir string, at time.Time) string {
	t.Helper()
	gen := GenerationPath(dir, NewGenerationID(at))
	if err := os.Mkdir(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(GenerationLock(gen), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return gen
}

// point makes the root at dir name gen, as a build does: a new symlink
// renamed over it.
func point(t *testing.T, dir, gen string) {
	t.Helper()
	tmp := dir + ".tmp-link"
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
}

func TestGenerationNames(t *testing.T) {
	at := time.Date(2026, 3, 15, 10, 11, 12, 0, time.UTC)
	id := NewGenerationID(at)
	name := filepath.Base(GenerationPath("/r/base", id))
	if got, ok := GenerationOf("base", name); !ok || !got.Equal(at) {
		t.Errorf("GenerationOf(%q) = %v, %v; want %v", name, got, ok, at)
	}
	for _, bad := range []string{"base", "base.lock", "base.gen-", "base.gen-20260315T101112Z", "base.gen-20260315T101112Z-abc",
		"base.gen-20260315T101112Z-ABCDEF", name + ".lock", "datasci" + name[len("base"):], "base.tmp-x"} {
		if _, ok := GenerationOf("base", bad); ok {
			t.Errorf("GenerationOf(base, %q): taken for a generation", bad)
		}
	}
}

// TestResolve: a root's symlink names its generation; a directory is its
// own; other symlinks are followed to either.
func TestResolve(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "base")
	gen := newGeneration(t, dir, time.Now())
	point(t, dir, gen)
	if got, err := Resolve(dir); err != nil || got != gen {
		t.Errorf("Resolve(generation symlink) = %q, %v; want %q", got, err, gen)
	}
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(dir, alias); err != nil {
		t.Fatal(err)
	}
	if got, err := Resolve(alias); err != nil || got != gen {
		t.Errorf("Resolve(symlink to the root) = %q, %v; want %q", got, err, gen)
	}
	plain := filepath.Join(parent, "plain")
	os.Mkdir(plain, 0o755)
	if got, err := Resolve(plain); err != nil || got != plain {
		t.Errorf("Resolve(directory) = %q, %v", got, err)
	}
	if _, err := Resolve(filepath.Join(parent, "missing")); !os.IsNotExist(err) {
		t.Errorf("Resolve(missing): %v, want not-exist", err)
	}
}

// TestHoldBlocksRemoval: a held generation cannot be locked exclusively
// (what the builder needs to remove it) until Close; a directory that is
// not a generation is returned without a lock.
func TestHoldBlocksRemoval(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	gen := newGeneration(t, dir, time.Now())
	point(t, dir, gen)
	h, err := Hold(dir)
	if err != nil || h.Dir != gen {
		t.Fatalf("Hold = %+v, %v; want %s", h, err, gen)
	}
	tryExclusive := func() error {
		f, err := os.Open(GenerationLock(gen))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err := tryExclusive(); err != syscall.EWOULDBLOCK {
		t.Errorf("exclusive lock of a held generation: %v, want EWOULDBLOCK", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := tryExclusive(); err != nil {
		t.Errorf("exclusive lock after Close: %v", err)
	}

	plain := t.TempDir()
	if h, err := Hold(plain); err != nil || h.Dir != plain || h.lock != nil {
		t.Errorf("Hold(a plain directory) = %+v, %v", h, err)
	}
}

// TestHoldRetriesAfterSweep: a run that resolved the root just before a
// rebuild switched it and swept the old generation (the builder held the
// old lock exclusively meanwhile) ends up holding the new generation.
func TestHoldRetriesAfterSweep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	old := newGeneration(t, dir, time.Now())
	point(t, dir, old)

	// The builder's exclusive lock on the old generation.
	lock, err := os.Open(GenerationLock(old))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	type held struct {
		h   *Held
		err error
	}
	done := make(chan held, 1)
	go func() {
		h, err := Hold(dir) // resolves to old, then waits for its lock
		done <- held{h, err}
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Hold did not wait for the builder: %+v, %v", r.h, r.err)
	default:
	}
	// The builder switches, renames the old generation away, unlinks its
	// lock and lets go.
	cur := newGeneration(t, dir, time.Now())
	point(t, dir, cur)
	if err := os.Rename(old, dir+".tmp-rm"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(GenerationLock(old)); err != nil {
		t.Fatal(err)
	}
	lock.Close()

	r := <-done
	if r.err != nil || r.h.Dir != cur {
		t.Fatalf("Hold across a sweep = %+v, %v; want %s", r.h, r.err, cur)
	}
	defer r.h.Close()

	// Both gone (a dangling symlink): an error naming the root.
	os.Remove(GenerationLock(cur))
	os.Rename(cur, dir+".tmp-rm2")
	if h, err := Hold(dir); err == nil {
		t.Errorf("Hold of a root whose generation is gone: %+v", h)
	}
}
