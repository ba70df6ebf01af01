package cgroup

import (
	"fmt"
	"math"
	"strings"

	"github.com/opencontainers/cgroups"
)

// Limits are the effective resource limits of one run. Every field must be
// set: a run is never started with a limit silently left open.
type Limits struct {
	MemoryBytes int64 // memory limit, socket buffers included; swap is off (v1: memsw == memory when memsw exists; v2: memory.swap.max = 0)
	// SocketBytes is the part of MemoryBytes that socket buffers may take
	// on cgroup v1, whose memory controller charges them to a counter of
	// their own, memory.kmem.tcp, and only once its limit is set (else to
	// the host-wide net.ipv4.tcp_mem, outside any run's limit). The v1
	// memory limit is then MemoryBytes-SocketBytes, so the two together
	// stay within MemoryBytes. 0 means no socket buffers at all (a run
	// whose seccomp filter refuses TCP and UDP sockets). Ignored on v2,
	// which charges socket buffers to memory.max with everything else.
	SocketBytes int64
	Pids        int64   // pids.max: processes and threads together
	CPUs        float64 // CPU quota in CPUs (1.0 = one CPU: quota 100000us per 100000us period)
}

const (
	// cpuPeriod is the CFS period of the CPU quota in microseconds: the
	// kernel's default (100 ms), so v1 and v2 behave alike.
	cpuPeriod = 100000
	// minCPUQuota is the smallest quota the kernel accepts (1 ms).
	minCPUQuota = 1000
	// maxCPUs keeps quota = CPUs*period far from overflowing int64.
	maxCPUs = 1 << 20
)

// validate rejects limits that would leave a resource unlimited or that the
// kernel would refuse, before anything is created.
func (l Limits) validate() error {
	if l.MemoryBytes <= 0 {
		return fmt.Errorf("cgroup: memory limit %d bytes: must be positive", l.MemoryBytes)
	}
	if l.SocketBytes < 0 || l.SocketBytes > l.MemoryBytes/2 {
		return fmt.Errorf("cgroup: socket memory %d bytes: must be between 0 and half the memory limit (%d bytes)", l.SocketBytes, l.MemoryBytes)
	}
	if l.Pids <= 0 {
		return fmt.Errorf("cgroup: pids limit %d: must be positive", l.Pids)
	}
	if math.IsNaN(l.CPUs) || l.CPUs*cpuPeriod < minCPUQuota || l.CPUs > maxCPUs {
		return fmt.Errorf("cgroup: CPU limit %v: must be between %v and %v CPUs",
			l.CPUs, float64(minCPUQuota)/cpuPeriod, maxCPUs)
	}
	return nil
}

// cpuQuota is the CFS quota in microseconds per cpuPeriod.
func (l Limits) cpuQuota() int64 { return int64(math.Round(l.CPUs * cpuPeriod)) }

// resources converts l into the library's Resources, with memory as the
// memory limit (MemoryBytes on v2, less SocketBytes on v1). Both managers take
// MemorySwap as memory+swap (the v1 meaning): equal to Memory means "no
// swap", which fs writes to memory.memsw.limit_in_bytes and fs2 converts to
// memory.swap.max = 0 (ignored when the kernel has no swap accounting).
//
// memsw is false only on a v1 host without memory.memsw.* (swapaccount=0):
// writing MemorySwap there would fail, so swap is instead kept out with
// memory.swappiness = 0, which for a v1 memory cgroup's own reclaim (the one
// its limit triggers) disables swapping entirely.
func (l Limits) resources(memory int64, memsw bool) *cgroups.Resources {
	pids := l.Pids
	r := &cgroups.Resources{
		Memory:    memory,
		PidsLimit: &pids,
		CpuQuota:  l.cpuQuota(),
		CpuPeriod: cpuPeriod,
		// The devices cgroup is not ours to manage: device access is
		// confined by the minimal /dev and the user namespace.
		SkipDevices: true,
	}
	if memsw {
		r.MemorySwap = memory
	} else {
		var zero uint64
		r.MemorySwappiness = &zero
	}
	return r
}

// maxName bounds run and parent names well under NAME_MAX.
const maxName = 128

// checkName accepts one directory name of the kind nsbox creates (run IDs
// are hex), so that a name can never climb out of its parent (".", "..",
// "/"). A name equal to an interface file (cgroup.procs) is not refused
// here: mkdir fails on it with EEXIST.
func checkName(name string) error {
	bad := func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}
	if name == "" || len(name) > maxName || name[0] == '.' || strings.IndexFunc(name, bad) >= 0 {
		return fmt.Errorf("cgroup: invalid name %q: want 1-%d letters, digits, '-', '_' or '.', not starting with '.'", name, maxName)
	}
	return nil
}

// checkParent accepts a relative path of valid names ("nsbox", "a/b").
func checkParent(parent string) error {
	for _, elem := range strings.Split(parent, "/") {
		if err := checkName(elem); err != nil {
			return fmt.Errorf("cgroup: invalid parent %q: %w", parent, err)
		}
	}
	return nil
}
