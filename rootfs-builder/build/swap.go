package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// lockOut takes an exclusive flock of OUT.lock, waiting for a concurrent
// build of the same OUT to finish (or ctx to end). The lock file stays:
// removing it would let a third builder lock a new file while the second
// still holds the old one.
func lockOut(ctx context.Context, out string) (func(), error) {
	p := out + ".lock"
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock output directory: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the build holding %s: %w", p, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkReplaceable refuses an OUT that is not ours to replace: a file, a
// symlink that does not name one of OUT's generations, or a directory
// that is neither empty nor a root built by nsbox (it has MetaDir, and
// was built in place by an older nsbox). A mistyped --out /usr must not
// be swapped away.
func checkReplaceable(out string) error {
	fi, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(out)
		if err != nil {
			return fmt.Errorf("output directory: %w", err)
		}
		if _, ok := rootfs.GenerationOf(filepath.Base(out), target); !ok {
			return fmt.Errorf("output directory %s: a symlink to %s, not to one of its generations: refusing to replace it", out, target)
		}
		return nil
	}
	if !fi.IsDir() {
		return fmt.Errorf("output directory %s: exists and is not a directory (%v)", out, fi.Mode().Type())
	}
	if _, err := os.Lstat(filepath.Join(out, rootfs.MetaDir)); err == nil {
		return nil
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("output directory %s: refusing to replace a non-empty directory that is not an nsbox root (no %s)", out, rootfs.MetaDir)
	}
	return nil
}

// sweepStale removes OUT.tmp-* left by builds that died: build
// directories, symlinks not yet renamed over OUT, generations renamed
// away for removal. The caller holds the lock, so no build is using them,
// and no run can: runs only reach generations, through OUT or their
// OUT.gen-ID name.
func sweepStale(out string) error {
	stale, err := filepath.Glob(out + ".tmp-*")
	if err != nil {
		return fmt.Errorf("find stale build directories %s.tmp-*: %w", out, err)
	}
	for _, s := range stale {
		if err := removeSettling(s); err != nil {
			return fmt.Errorf("remove stale build directory: %w", err)
		}
	}
	return nil
}

// settleTime bounds how long sweepStale waits for a killed build's last
// writers. SIGKILL reaches the build's PID namespace when nsbox dies
// (command.go), but the kernel tears the namespace down after nsbox's
// parent has already seen it exit: for a moment, a compileall worker of
// the dead build may still create a file in the directory being removed,
// and RemoveAll then fails with "directory not empty".
const settleTime = 5 * time.Second

// removeSettling is os.RemoveAll, tried again while the directory keeps
// gaining entries (ENOTEMPTY), for at most settleTime.
func removeSettling(dir string) error {
	deadline := time.Now().Add(settleTime)
	for {
		err := os.RemoveAll(dir)
		if err == nil || !errors.Is(err, unix.ENOTEMPTY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncFS flushes the file system holding dir (syncfs(2)): one call for
// every file of the build.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync build directory: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync build directory %s: %w", dir, err)
	}
	return nil
}
