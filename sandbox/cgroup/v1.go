package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
)

// createV1 creates <mount>/<parent>/<name> in every usable hierarchy of
// v1Hierarchies (info.Controllers) and sets the limits with the fs manager,
// then the socket buffers' share (setTCPLimit). Kernel memory in general
// is not limited: the kernel ignores memory.kmem.limit_in_bytes since 5.16
// (it is charged to memory.limit_in_bytes instead) and the manager no
// longer writes it.
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
	res := l.resources(l.MemoryBytes-l.SocketBytes, hasMemsw(info.Controllers["memory"]))
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
	if err := setTCPLimit(c.paths["memory"], l.SocketBytes); err != nil {
		return nil, err
	}
	return c, nil
}

// tcpLimitFile is the v1 limit of a memory cgroup's socket buffers
// (Linux 3.3). opencontainers/cgroups no longer writes it
// (Resources.KernelMemoryTCP is ignored), so nsbox does.
const tcpLimitFile = "memory.kmem.tcp.limit_in_bytes"

// setTCPLimit bounds the socket buffers of the v1 memory cgroup dir to
// bytes, and checks that the kernel took the value. v1 charges socket
// buffers (TCP and UDP) to memory.kmem.tcp, apart from
// memory.limit_in_bytes, and only for sockets created after this limit was
// first written (mm/memcontrol-v1.c: tcpmem_active); before that they are
// charged to the host-wide net.ipv4.tcp_mem and count against no run. So
// it is written here, before any process joins, even as 0.
func setTCPLimit(dir string, bytes int64) error {
	path := filepath.Join(dir, tcpLimitFile)
	if err := cgroups.WriteFile(dir, tcpLimitFile, strconv.FormatInt(bytes, 10)); err != nil {
		return fmt.Errorf("cgroup: set the socket memory limit: write %d to %s: %w", bytes, path, err)
	}
	got, err := cgroups.ReadFile(dir, tcpLimitFile)
	if err != nil {
		return fmt.Errorf("cgroup: read back %s: %w", path, err)
	}
	if v, err := strconv.ParseInt(strings.TrimSpace(got), 10, 64); err != nil || v != bytes {
		return fmt.Errorf("cgroup: %s is %q after writing %d: the kernel did not take the socket memory limit", path, strings.TrimSpace(got), bytes)
	}
	return nil
}
