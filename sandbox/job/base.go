package job

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/rootfs-builder/build"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
	"github.com/nsbox/nsbox/sandbox/roots"
)

// EnsureBase builds the built-in base root before a run that needs it,
// when it is missing or holds another nsbox's runner, and says so on log:
// the one place a run builds anything. Concurrent first runs build it
// once (a lock in the roots directory). Other roots are never built here:
// opening them reports how to build them.
func EnsureBase(ctx context.Context, name string, log io.Writer) error {
	if name != "base" || baseReady() {
		return nil
	}
	dir := roots.Path("base")
	if err := os.MkdirAll(roots.Dir(), 0o755); err != nil {
		return fmt.Errorf("create roots dir %s: %w", roots.Dir(), err)
	}
	lockPath := filepath.Join(roots.Dir(), ".build-base.lock")
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", lockPath, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lockPath, err)
	}
	// Someone else may have built it while this run waited for the lock.
	if baseReady() {
		return nil
	}
	why := "first use"
	if _, err := os.Stat(filepath.Join(dir, rootfs.MetaDir)); err == nil {
		why = "its Python runner is from another nsbox version"
	}
	fmt.Fprintf(log, "nsbox: building the base root (%s) from %s into %s\n", why, roots.BasePython, dir)
	_, err = build.Build(ctx, build.Options{Python: roots.BasePython, Out: dir, Version: Version, Progress: build.NewQuietReporter()})
	if err != nil {
		return fmt.Errorf("build base root into %s: %w", dir, err)
	}
	fmt.Fprintf(log, "nsbox: base root ready\n")
	return nil
}

// baseReady reports whether the base root exists with this nsbox's runner.
func baseReady() bool {
	dir := roots.Path("base")
	_, err := os.Stat(filepath.Join(dir, rootfs.MetaDir))
	return err == nil && roots.HasRunner(dir)
}
