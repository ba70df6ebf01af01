package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
)

// createV1 creates <mount>/<parent>/<name> in every usable hierarchy of
// v1Hierarchies (info.Controllers) and sets the limits with the fs manager.
// Kernel memory is not limited: the kernel ignores kmem limits since 5.16
// and the manager no longer writes them.
func (h *host) createV1(parent, name string, l Limits, info Info) (_ *Cgroup, err error) {
	c := &Cgroup{h: h, rel: parent + "/" + name, paths: make(map[string]string), fd: -1}
	for ctrl, mnt := range info.Controllers {
		c.paths[ctrl] = filepath.Join(mnt, parent, name)
	}
	// On failure, remove what this call created, and only that.
	var created []string
	defer func() {
		if err != nil {
			for _, dir := range created {
				err = errors.Join(err, h.rmdir(dir))
			}
		}
	}()
	for _, dir := range c.dirs() {
		// The parent is shared by all runs; it may or may not exist.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: create %s: %w", filepath.Dir(dir), err)
		}
		if err := h.mkdirRun(dir); err != nil {
			return nil, err
		}
		created = append(created, dir)
	}

	// Swap off: memsw = memory where the kernel accounts swap, else
	// swappiness 0 (see Limits.resources).
	res := l.resources(hasMemsw(info.Controllers["memory"]))
	// The manager gets its own copy of the paths: its Destroy would edit
	// the map.
	c.v1, err = fs.NewManager(&cgroups.Cgroup{Resources: res}, maps.Clone(c.paths))
	if err != nil {
		return nil, fmt.Errorf("cgroup: v1 manager for %s: %w", c.rel, err)
	}
	// Set writes only files under the paths given, in the manager's order
	// (memory before memsw, period before quota).
	if err := c.v1.Set(res); err != nil {
		return nil, fmt.Errorf("cgroup: set limits %+v on %s: %w", l, c.where(), err)
	}
	return c, nil
}
