package build

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// checkReplaceable refuses an OUT that is not ours to replace: a symlink,
// a file, or a directory that is neither empty nor a root built by nsbox
// (it has MetaDir). A mistyped --out /usr must not be swapped away.
func checkReplaceable(out string) error {
	fi, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
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

// sweepStale removes OUT.tmp-* and OUT.old-* left by builds that died
// (the caller holds the lock, so no build is using them).
func sweepStale(out string) error {
	for _, pat := range []string{out + ".tmp-*", out + ".old-*"} {
		stale, err := filepath.Glob(pat)
		if err != nil {
			return fmt.Errorf("find stale build directories %s: %w", pat, err)
		}
		for _, s := range stale {
			if err := os.RemoveAll(s); err != nil {
				return fmt.Errorf("remove stale build directory: %w", err)
			}
		}
	}
	return nil
}

// swapIn makes tmp the root at out atomically, then removes the previous
// root. Every file is synced first, so that after a crash out is either
// the old root or the complete new one.
//
// With an existing out, renameat2(RENAME_EXCHANGE) swaps the two names in
// one step: there is no moment without a root at out. A file system
// without it (EINVAL) gets two renames, with a short window where out is
// missing. A new out is created with RENAME_NOREPLACE.
func swapIn(tmp, out string) error {
	if err := syncFS(tmp); err != nil {
		return err
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		// tmp now names the previous root.
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("new root in place at %s, but removing the previous one failed: %w", out, err)
		}
		return nil
	case errors.Is(err, unix.ENOENT):
		err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			err = os.Rename(tmp, out) // no RENAME_NOREPLACE here; the lock excludes other builders
		}
		if err != nil {
			return fmt.Errorf("rename %s to %s: %w", tmp, out, err)
		}
		return nil
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
		return swapByRenames(tmp, out)
	}
	return fmt.Errorf("exchange %s and %s: %w", tmp, out, err)
}

// swapByRenames replaces out with tmp by moving out aside first.
func swapByRenames(tmp, out string) error {
	var rnd [6]byte
	rand.Read(rnd[:]) // never fails (crypto/rand, Go 1.24+)
	old := out + ".old-" + hex.EncodeToString(rnd[:])
	if err := os.Rename(out, old); err != nil {
		return fmt.Errorf("move the previous root aside: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		if rerr := os.Rename(old, out); rerr != nil {
			return fmt.Errorf("rename %s to %s: %w (and restoring the previous root failed: %v)", tmp, out, err, rerr)
		}
		return fmt.Errorf("rename %s to %s: %w", tmp, out, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("new root in place at %s, but removing the previous one failed: %w", out, err)
	}
	return nil
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
