package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Sweep removes leftover run cgroups under DefaultParent (left by a
// crashed supervisor): for every child name for which live(name) is false,
// it kills the processes in it and removes it. It returns the names
// removed, and an error joining every failure (the other names are still
// swept). live must also report as live a run that is between New and
// whatever makes it count as live (e.g. its locked run directory), or a
// concurrent Sweep kills it at birth.
func Sweep(live func(name string) bool) ([]string, error) {
	return SweepParent(DefaultParent, live)
}

// SweepParent is Sweep under another parent (see NewWithParent).
func SweepParent(parent string, live func(name string) bool) ([]string, error) {
	h, err := detectHost()
	if err != nil {
		return nil, err
	}
	return h.sweep(parent, live)
}

func (h *host) sweep(parent string, live func(name string) bool) ([]string, error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	// On v1 a crash between two mkdirs leaves a run in some hierarchies
	// only: collect names from all of them.
	names := make(map[string]bool)
	for _, base := range h.parentDirs(parent) {
		entries, err := os.ReadDir(base)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup: sweep: read %s: %w", base, err)
		}
		for _, e := range entries {
			// Directories nsbox would not have created are left alone.
			if e.IsDir() && checkName(e.Name()) == nil {
				names[e.Name()] = true
			}
		}
	}
	var removed []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if live(name) {
			continue
		}
		c, err := h.open(parent, name)
		if err == nil {
			err = c.Destroy()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: sweep %s/%s: %w", parent, name, err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// parentDirs are the parent's directories: one per v1 hierarchy of a run,
// or the one under the v2 root; in rootless mode the one under the
// delegated subtree, and none on v1 (root's runs are not this process's).
func (h *host) parentDirs(parent string) []string {
	if h.version == 2 {
		return []string{filepath.Join(h.base(), parent)}
	}
	if h.rootless {
		return nil
	}
	var dirs []string
	for _, ctrl := range v1Hierarchies {
		if mnt, ok := h.v1[ctrl]; ok {
			dirs = append(dirs, filepath.Join(mnt, parent))
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(dirs)))
}
