package job

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/roots"
)

// TestBaseBuiltOnceOnFirstUse: three concurrent first runs on base in an
// empty roots directory build it once and all get the same checked root.
func TestBaseBuiltOnceOnFirstUse(t *testing.T) {
	mustwork.NeedRoot(t)
	mustwork.NeedPath(t, roots.BasePython)
	t.Setenv("NSBOX_ROOTS_DIR", t.TempDir())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var logs strings.Builder
	errs := make([]error, 3)
	paths := make([]string, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var log strings.Builder
			err := EnsureBase(context.Background(), "base", &log)
			var r *roots.Root
			if err == nil {
				r, err = roots.Open("base", false)
			}
			errs[i] = err
			if err == nil {
				paths[i] = r.Header.Python.Path
				r.Close()
			}
			mu.Lock()
			logs.WriteString(log.String())
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if paths[i] != "/venv/bin/python" {
			t.Errorf("open %d: interpreter %q", i, paths[i])
		}
	}
	if n := strings.Count(logs.String(), "building the base root"); n != 1 {
		t.Errorf("base built %d times, want once:\n%s", n, logs.String())
	}
	r, err := roots.Open("base", true)
	if err != nil {
		t.Fatalf("full verification of a fresh base: %v", err)
	}
	// The run holds its generation (the path's target, with its lock)
	// until Close: a build could not remove it before.
	gen, err := filepath.EvalSymlinks(roots.Path("base"))
	if err != nil || r.Dir != gen || r.Path != roots.Path("base") {
		t.Errorf("Open: Dir %s, Path %s; want the generation %s (%v)", r.Dir, r.Path, gen, err)
	}
	exclusive := func() error {
		f, err := os.Open(gen + ".lock")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err := exclusive(); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("exclusive lock of an open root's generation: %v, want EWOULDBLOCK", err)
	}
	r.Close()
	if err := exclusive(); err != nil {
		t.Errorf("exclusive lock after Close: %v", err)
	}
}
