package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// Remove removes the root at out (a symlink to its current generation):
// every generation with its lock file, what builds that died left, the
// symlink and the build lock. It holds the build lock meanwhile, and
// refuses, removing nothing:
//   - while a run holds any generation of the root;
//   - while a root in one of the directories search (the roots directory,
//     the root's own directory) names it as its parent (a layered root);
//   - a root that is not managed in generations (a directory an older
//     nsbox built in place), or a generation an older nsbox built that is
//     younger than rootfs.LegacyKeep (its runs hold no lock).
//
// A layered root's files are hard links, so removing a generation of its
// parent (by a rebuild or a sweep) takes nothing from it; removing the
// parent root would only leave it without a parent to rebuild from.
func Remove(ctx context.Context, out string, search []string) error {
	if os.Geteuid() != 0 {
		return errors.New("removing a root needs root: its files are owned by root")
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("root %s: %w", out, err)
	}
	fi, err := os.Lstat(out)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("root %s: not a root managed in generations (a symlink to ROOT.gen-ID): remove it by hand once no run uses it", out)
	}
	if err := checkReplaceable(out); err != nil {
		return err
	}
	unlock, err := lockOut(ctx, out)
	if err != nil {
		return err
	}
	defer unlock()
	if err := refuseParentOf(out, search); err != nil {
		return err
	}
	gens, release, err := holdAllGenerations(out)
	defer release()
	if err != nil {
		return err
	}
	// The symlink first: no new run can reach the root after this.
	if err := os.Remove(out); err != nil {
		return fmt.Errorf("remove root: %w", err)
	}
	for _, g := range gens {
		doomed, err := renameAway(out, g)
		if err != nil {
			return err
		}
		if err := os.Remove(rootfs.GenerationLock(g)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove generation lock: %w", err)
		}
		if err := os.RemoveAll(doomed); err != nil {
			return fmt.Errorf("remove generation: %w", err)
		}
	}
	if err := sweepStale(out); err != nil {
		return err
	}
	if err := os.Remove(out + ".lock"); err != nil {
		return fmt.Errorf("remove build lock: %w", err)
	}
	return nil
}

// refuseParentOf refuses when a root in one of the directories search
// names out as its parent.
func refuseParentOf(out string, search []string) error {
	seen := map[string]bool{}
	for _, dir := range append(search, filepath.Dir(out)) {
		if dir == "" || seen[filepath.Clean(dir)] {
			continue
		}
		seen[filepath.Clean(dir)] = true
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("look for roots built from %s: %w", out, err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.Contains(name, ".gen-") || strings.Contains(name, ".tmp-") || strings.HasSuffix(name, ".lock") {
				continue
			}
			child := filepath.Join(dir, name)
			if child == out {
				continue
			}
			m, err := rootfs.Load(child)
			if err != nil || m.Parent == nil || !sameRoot(m.Parent.Path, out) {
				continue // not a root, or not one built from out
			}
			return fmt.Errorf("%s is the parent of %s (built from it): remove %s first", filepath.Base(out), name, child)
		}
	}
	return nil
}

// sameRoot reports whether the paths a and b name the same root symlink.
func sameRoot(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Lstat(a)
	fb, errB := os.Lstat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// holdAllGenerations takes every generation lock of out exclusively,
// without waiting, and returns the generations; a lock held by a run
// refuses. release lets go of what was taken.
func holdAllGenerations(out string) ([]string, func(), error) {
	var locks []*os.File
	release := func() {
		for _, l := range locks {
			l.Close()
		}
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil {
		return nil, release, fmt.Errorf("list generations of %s: %w", out, err)
	}
	var gens []string
	for _, e := range entries {
		created, ok := rootfs.GenerationOf(filepath.Base(out), e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		g := filepath.Join(filepath.Dir(out), e.Name())
		l, err := os.Open(rootfs.GenerationLock(g))
		if errors.Is(err, fs.ErrNotExist) {
			if age := time.Since(created); age < rootfs.LegacyKeep {
				return nil, release, fmt.Errorf("root %s: %s was built in place by an older nsbox, whose runs take no lock: it can be removed %v after it was replaced", out, g, rootfs.LegacyKeep)
			}
			gens = append(gens, g)
			continue
		}
		if err != nil {
			return nil, release, fmt.Errorf("open generation lock: %w", err)
		}
		locks = append(locks, l)
		if err := unix.Flock(int(l.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
			return nil, release, fmt.Errorf("root %s: a run holds its generation %s: remove it after the run ends", out, g)
		} else if err != nil {
			return nil, release, fmt.Errorf("lock %s: %w", l.Name(), err)
		}
		gens = append(gens, g)
	}
	return gens, release, nil
}
