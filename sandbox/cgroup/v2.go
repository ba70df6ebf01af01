package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"
)

// createV2 creates <root>/<parent>/<name>, delegating the needed
// controllers down to it, sets the limits with the fs2 manager and opens the
// directory for CLONE_INTO_CGROUP. In rootless mode <root> is the delegated
// subtree (h.base): nothing above it is written.
func (h *host) createV2(parent, name string, l Limits) (_ *Cgroup, err error) {
	// A controller reaches a cgroup only if every ancestor lists it in
	// cgroup.subtree_control: enable them from the root down to the parent
	// (runc does the same for the path it creates). The parent never holds
	// processes, so the "no internal processes" rule cannot refuse this
	// below the root.
	cur := h.base()
	if err := enableControllers(cur); err != nil {
		return nil, err
	}
	for _, elem := range strings.Split(parent, "/") {
		cur = filepath.Join(cur, elem)
		if err := os.Mkdir(cur, 0o755); err == nil {
			if err := h.populated(cur); err != nil {
				return nil, err
			}
		} else if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cgroup: create %s: %w", cur, err)
		}
		if err := enableControllers(cur); err != nil {
			return nil, err
		}
	}

	dir := filepath.Join(cur, name)
	if err := h.mkdirRun(dir); err != nil {
		return nil, err
	}
	c := &Cgroup{h: h, rel: parent + "/" + name, paths: map[string]string{v2Key: dir}, dir: dir, fd: -1}
	defer func() {
		if err != nil {
			if c.fd >= 0 {
				unix.Close(c.fd)
			}
			err = errors.Join(err, h.rmdir(dir))
		}
	}()

	// Fail closed: check the controllers really arrived, rather than
	// learn it from a missing memory.max.
	have, err := readWords(dir, "cgroup.controllers")
	if err != nil {
		return nil, err
	}
	for _, ctrl := range neededV2 {
		if !have[ctrl] {
			return nil, fmt.Errorf("cgroup: create %s: %w: controller %q not delegated to it", dir, ErrUnavailable, ctrl)
		}
	}

	// memory.swap.max = 0, memory.max, pids.max, cpu.max "quota period".
	// memory.max covers socket buffers: on v2 the kernel charges them to
	// the socket's memory cgroup like any other memory (mm/memcontrol.c,
	// mem_cgroup_charge_skmem; "sock" in memory.stat), unless it was
	// booted with cgroup.memory=nosocket, which Detect refuses.
	res := l.resources(l.MemoryBytes, true)
	c.v2, err = fs2.NewManager(&cgroups.Cgroup{Resources: res}, dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup: v2 manager for %s: %w", dir, err)
	}
	if err := c.v2.Set(res); err != nil {
		return nil, fmt.Errorf("cgroup: set limits %+v on %s: %w", l, dir, err)
	}

	// memory.oom.group = 1: when the OOM killer picks a process of the
	// run, it kills the whole run at once. A run that lost one process
	// to OOM (say a worker its parent waits for) is broken anyway, and
	// this ends it now, cleanly reported as OOM, instead of at the
	// timeout. Linux 4.19+; older kernels kill just the one process.
	if err := cgroups.WriteFile(dir, "memory.oom.group", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cgroup: write 1 to %s: %w", filepath.Join(dir, "memory.oom.group"), err)
	}

	// The fd for clone3(CLONE_INTO_CGROUP). O_RDONLY rather than O_PATH:
	// every kernel with CLONE_INTO_CGROUP (5.7) accepts it.
	c.fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.fd = -1
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return c, nil
}

// enableControllers enables the needed controllers in dir's
// cgroup.subtree_control, writing only those not enabled yet.
func enableControllers(dir string) error {
	enabled, err := readWords(dir, "cgroup.subtree_control")
	if err != nil {
		return err
	}
	var add []string
	for _, ctrl := range neededV2 {
		if !enabled[ctrl] {
			add = append(add, "+"+ctrl)
		}
	}
	if len(add) == 0 {
		return nil
	}
	data := strings.Join(add, " ")
	if err := cgroups.WriteFile(dir, "cgroup.subtree_control", data); err != nil {
		err = fmt.Errorf("cgroup: write %q to %s: %w", data, filepath.Join(dir, "cgroup.subtree_control"), err)
		if errors.Is(err, unix.EBUSY) {
			err = fmt.Errorf("%w (processes live in %s; %s)", err, dir, fmt.Sprintf(hintV2InternalProcs, dir))
		}
		return err
	}
	return nil
}
