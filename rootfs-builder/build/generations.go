package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// The builder's half of the generation layout (rootfs "Generations"): a
// finished build becomes a new generation and OUT is switched to it in
// one rename; old generations go only when no run holds them.

// switchTo makes the finished build at tmp a generation of out and points
// out at it. Every file is synced first, so that after a crash out names
// either the previous generation or the complete new one. It returns the
// new generation's path.
//
// Order, each step safe to crash after: the lock file (a generation
// without one would be taken for a legacy one and kept for a day), the
// generation under its final name (not in use: a later sweep removes it),
// then out, replaced by a new symlink in one rename.
func switchTo(tmp, out string) (string, error) {
	if err := syncFS(tmp); err != nil {
		return "", err
	}
	now := time.Now()
	gen := rootfs.GenerationPath(out, rootfs.NewGenerationID(now))
	lock, err := os.OpenFile(rootfs.GenerationLock(gen), os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("create generation lock: %w", err)
	}
	lock.Close()
	if err := os.Rename(tmp, gen); err != nil {
		return "", fmt.Errorf("rename %s to %s: %w", tmp, gen, err)
	}
	fi, err := os.Lstat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink != 0:
		// A first build, or out names an older generation
		// (checkReplaceable made sure): a new symlink renamed over it.
		link := out + ".tmp-link-" + filepath.Base(gen)
		if err := os.Symlink(filepath.Base(gen), link); err != nil {
			return "", fmt.Errorf("create symlink to the new generation: %w", err)
		}
		if err := os.Rename(link, out); err != nil {
			return "", fmt.Errorf("rename %s to %s: %w", link, out, err)
		}
	case err != nil:
		return "", fmt.Errorf("output directory: %w", err)
	default:
		// A directory: a root an older nsbox built in place (or an empty
		// directory). Its runs may still use it, so it is renamed, never
		// removed: it becomes a generation without a lock.
		if err := convert(out, gen, now); err != nil {
			return "", err
		}
	}
	if err := syncDir(filepath.Dir(out)); err != nil {
		return "", err
	}
	return gen, nil
}

// convert replaces the directory out with a symlink to gen. A symlink
// made under the name the old directory is to get is exchanged with it
// (renameat2 RENAME_EXCHANGE): out is never missing, and the old tree is
// never under a name a sweep removes at once. On a file system without
// the exchange (EINVAL), two renames leave out missing for a moment.
func convert(out, gen string, now time.Time) error {
	legacy := rootfs.GenerationPath(out, rootfs.NewGenerationID(now))
	if err := os.Symlink(filepath.Base(gen), legacy); err != nil {
		return fmt.Errorf("create symlink to the new generation: %w", err)
	}
	err := unix.Renameat2(unix.AT_FDCWD, legacy, unix.AT_FDCWD, out, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if err := os.Remove(legacy); err != nil {
			return fmt.Errorf("remove symlink: %w", err)
		}
		if err := os.Rename(out, legacy); err != nil {
			return fmt.Errorf("move the previous root aside: %w", err)
		}
		link := out + ".tmp-link-" + filepath.Base(gen)
		if err := os.Symlink(filepath.Base(gen), link); err != nil {
			return fmt.Errorf("create symlink to the new generation: %w", err)
		}
		err = os.Rename(link, out)
	}
	if err != nil {
		return fmt.Errorf("switch %s to %s: %w", out, gen, err)
	}
	// An empty directory held no root and no run: nothing to keep.
	if _, err := os.Lstat(filepath.Join(legacy, rootfs.MetaDir)); errors.Is(err, fs.ErrNotExist) {
		if err := os.Remove(legacy); err != nil {
			return fmt.Errorf("remove the empty directory replaced by %s: %w", out, err)
		}
	}
	return nil
}

// sweepGenerations removes every generation of out that is not the
// current one and that no run holds, with its lock file, and returns the
// generations it kept. A run holds a generation with a shared flock of
// its lock; this takes it exclusively without waiting, renames the
// generation away (so a run that resolved out before the switch finds it
// gone after locking, and resolves again), unlinks the lock and only then
// removes the tree. A generation without a lock (a root an older nsbox
// built in place, renamed aside) is kept for rootfs.LegacyKeep after it
// was converted; so is an OUT.old-* an older nsbox's build left when it
// died, counted from its last status change (the rename). The caller
// holds lockOut.
func sweepGenerations(out string, now time.Time) ([]string, error) {
	cur, err := rootfs.Resolve(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("find the current generation of %s: %w", out, err)
	}
	parent, base := filepath.Dir(out), filepath.Base(out)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("list generations of %s: %w", out, err)
	}
	var kept []string
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(parent, name)
		if p == cur {
			continue
		}
		var keep bool
		var err error
		if created, ok := rootfs.GenerationOf(base, name); ok && !e.IsDir() {
			// Not a generation: the symlink of a conversion that died
			// before its exchange.
			if err := os.Remove(p); err != nil {
				return kept, fmt.Errorf("remove stale symlink: %w", err)
			}
		} else if ok {
			keep, err = removeGeneration(out, p, now.Sub(created))
		} else if gen, ok := strings.CutSuffix(name, ".lock"); ok && isGenerationOf(base, gen) {
			err = removeOrphanLock(out, filepath.Join(parent, gen))
		} else if strings.HasPrefix(name, base+".old-") {
			keep, err = removeOld(out, p, now)
		}
		if err != nil {
			return kept, err
		}
		if keep {
			kept = append(kept, p)
		}
	}
	return kept, nil
}

func isGenerationOf(base, name string) bool {
	_, ok := rootfs.GenerationOf(base, name)
	return ok
}

// removeGeneration removes the generation gen (age since it was created)
// unless a run holds it or, without a lock file, it is younger than
// rootfs.LegacyKeep; it reports whether it kept it.
func removeGeneration(out, gen string, age time.Duration) (bool, error) {
	lock, err := os.Open(rootfs.GenerationLock(gen))
	if errors.Is(err, fs.ErrNotExist) {
		if age < rootfs.LegacyKeep {
			return true, nil
		}
		return false, discard(out, gen)
	}
	if err != nil {
		return false, fmt.Errorf("open generation lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil // a run holds it
	} else if err != nil {
		return false, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	doomed, err := renameAway(out, gen)
	if err != nil {
		return false, err
	}
	if err := os.Remove(lock.Name()); err != nil {
		return false, fmt.Errorf("remove generation lock: %w", err)
	}
	lock.Close() // runs waiting for it find the generation gone
	if err := os.RemoveAll(doomed); err != nil {
		return false, fmt.Errorf("remove old generation: %w", err)
	}
	return false, nil
}

// removeOrphanLock removes the lock of a generation that is gone (a build
// died before renaming its directory into place, or a sweep died after
// renaming it away), unless someone holds it.
func removeOrphanLock(out, gen string) error {
	if _, err := os.Lstat(gen); err == nil {
		return nil // its generation's own turn
	}
	lock, err := os.Open(rootfs.GenerationLock(gen))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open generation lock: %w", err)
	}
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return nil
	}
	if err := os.Remove(lock.Name()); err != nil {
		return fmt.Errorf("remove stale generation lock: %w", err)
	}
	return nil
}

// removeOld removes an OUT.old-* directory once rootfs.LegacyKeep has
// passed since it was renamed there (its ctime); it reports whether it
// kept it.
func removeOld(out, p string, now time.Time) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	if now.Sub(time.Unix(st.Ctim.Unix())) < rootfs.LegacyKeep {
		return true, nil
	}
	return false, discard(out, p)
}

// discard renames p away and removes it.
func discard(out, p string) error {
	doomed, err := renameAway(out, p)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(doomed); err != nil {
		return fmt.Errorf("remove old generation: %w", err)
	}
	return nil
}

// renameAway renames p to OUT.tmp-rm-*, which no run can reach and
// sweepStale removes if this builder dies before it has.
func renameAway(out, p string) (string, error) {
	doomed := out + ".tmp-rm-" + rootfs.NewGenerationID(time.Now())
	if err := os.Rename(p, doomed); err != nil {
		return "", fmt.Errorf("move %s aside for removal: %w", p, err)
	}
	return doomed, nil
}

// Sweep removes what builds of out left behind: the directories of builds
// that died, and the generations no run holds any more (see
// sweepGenerations, which every build also does). It waits for a build of
// out in progress, and returns the generations it kept.
func Sweep(ctx context.Context, out string) ([]string, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", out, err)
	}
	if err := checkReplaceable(out); err != nil {
		return nil, err
	}
	unlock, err := lockOut(ctx, out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := sweepStale(out); err != nil {
		return nil, err
	}
	return sweepGenerations(out, time.Now())
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
