package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/userns"
)

// Info is what the host's cgroup setup allows (used by `nsbox doctor` and
// the fail-closed check in New).
type Info struct {
	Version     int               // 1 (v1 or hybrid) or 2 (unified)
	Controllers map[string]string // usable needed controller -> where (v1: its mount path; v2: the root path); on v1 also "cpuacct" when usable
	Missing     []string          // needed controllers not usable: from "memory", "pids", "cpu", plus "freezer" on v1 (needed to kill reliably), and SocketMemory
	// Sockets says how the run's socket buffers are bounded: "memory.max"
	// (v2), "memory.kmem.tcp.limit_in_bytes" (v1); "" when they cannot be
	// (SocketMemory is then in Missing).
	Sockets  string
	Hint     string   // how to fix what's missing; empty when nothing is missing
	Warnings []string // limits that are weaker than asked but still enforced (e.g. v1 without memsw); runs may start
	// Delegation is, in rootless mode only (userns.Rootless), the cgroup
	// v2 subtree delegated to this process's user, below which runs are
	// created; nil as root. Controllers then name its path.
	Delegation *Delegation
}

// SocketMemory is the entry of Info.Missing for a memory controller that
// cannot count socket buffers against a run's limit: v1 without
// memory.kmem.tcp (a kernel built without it), or v2 booted with
// cgroup.memory=nosocket. A run's TCP buffers would then come out of the
// host-wide net.ipv4.tcp_mem, outside its memory limit.
const SocketMemory = "socket memory"

// Fixes for SocketMemory.
const (
	hintV1NoTCP = "this kernel's cgroup v1 memory controller has no " + tcpLimitFile + ": boot with cgroup v2 " +
		"(systemd.unified_cgroup_hierarchy=1), which charges socket buffers to memory.max"
	hintV2NoSocket = "remove nosocket from cgroup.memory= on the kernel command line: with it, cgroup v2 does not charge " +
		"socket buffers to memory.max"
)

// neededV1 and neededV2 are the controllers without which a run is not
// confined. On v1 the freezer is needed too: without it a forking program
// can outrun a kill loop. On v2 freezing and killing are part of the core.
var (
	neededV1 = []string{"memory", "pids", "cpu", "freezer"}
	neededV2 = []string{"memory", "pids", "cpu"}
)

// v1Hierarchies are the v1 hierarchies a run is created in: the needed ones
// and cpuacct, which only feeds Stats.CPU.
var v1Hierarchies = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// host is one machine's cgroup setup: which version and where the
// hierarchies are. Tests build one over a fake tree; production code gets
// it from detectHost.
type host struct {
	version int
	v1      map[string]string // v1: controller -> mount point, for every mounted one
	v2root  string            // v2: the unified root

	// onMkdir fills a newly made cgroup directory with its interface files,
	// as the kernel does; nil on a real cgroupfs (tests over a fake tree).
	onMkdir func(dir string) error
	// rmdir removes one cgroup directory (cgroups.RemovePath: rmdir with
	// sub-cgroups first, EBUSY retried for about a second).
	rmdir func(dir string) error
	// killTimeout bounds Kill (and so Destroy and Sweep).
	killTimeout time.Duration
	// cmdline is the kernel command line file, read for
	// cgroup.memory=nosocket on v2: /proc/cmdline ("" too).
	cmdline string

	// Rootless mode (userns.Rootless): runs only below the delegated
	// subtree (see delegate.go).
	rootless bool
	self     string                  // v2: this process's cgroup, relative to v2root ("/user.slice/...")
	pid      int                     // this process, as cgroup.procs lists it
	writable func(path string) error // whether this process may write path: accessWrite, or a fake
}

// defaultKillTimeout bounds how long Kill keeps killing: a cgroup that is
// not empty after 5 s holds something a SIGKILL cannot end (e.g. a process
// stuck in uninterruptible sleep), and waiting longer would not help.
const defaultKillTimeout = 5 * time.Second

// detectHost finds the cgroup version and, on v1, where each hierarchy is
// mounted. Hybrid hosts (v1 controllers plus an empty cgroup2 at
// /sys/fs/cgroup/unified) count as v1: that is where their controllers are.
//
// In rootless mode it finds this process's own cgroup instead, on v2 only:
// nothing of v1 can be delegated.
func detectHost() (*host, error) {
	h := &host{rmdir: cgroups.RemovePath, killTimeout: defaultKillTimeout}
	if userns.Rootless() {
		h.rootless, h.pid, h.writable = true, os.Getpid(), accessWrite
	}
	if cgroups.IsCgroup2UnifiedMode() {
		h.version, h.v2root = 2, fs2.UnifiedMountpoint
		if h.rootless {
			self, err := readSelfCgroup()
			if err != nil {
				return nil, err
			}
			h.self = self
		}
		return h, nil
	}
	h.version = 1
	if h.rootless {
		return h, nil
	}
	mounts, err := cgroups.GetCgroupMounts(false)
	if err != nil {
		return nil, fmt.Errorf("cgroup: find the v1 hierarchies in /proc/self/mountinfo: %w", err)
	}
	h.v1 = make(map[string]string)
	for _, m := range mounts {
		for _, s := range m.Subsystems {
			if _, ok := h.v1[s]; !ok {
				h.v1[s] = m.Mountpoint
			}
		}
	}
	return h, nil
}

// Detect reports what the host's cgroup setup allows. It changes nothing.
func Detect() (Info, error) {
	h, err := detectHost()
	if err != nil {
		return Info{}, err
	}
	return h.info()
}

func (h *host) info() (Info, error) {
	if h.rootless {
		return h.infoRootless()
	}
	if h.version == 2 {
		return h.infoV2()
	}
	return h.infoV1()
}

// Fixes, one per reason a controller can be unusable.
const (
	hintV1NotMounted = "mount the missing cgroup v1 hierarchies (e.g. `mount -t cgroup -o freezer cgroup /sys/fs/cgroup/freezer`); " +
		"a controller disabled on the kernel command line (cgroup_disable=...) must be re-enabled"
	hintReadOnly = "the cgroup filesystem is mounted read-only (Docker and Kubernetes do this by default): run nsbox on the host, " +
		"or give its container a writable /sys/fs/cgroup (e.g. `docker run --privileged --cgroupns=private`)"
	hintV2NotDelegated = "the controllers are not delegated to %s: run nsbox under systemd with Delegate=yes " +
		"(a unit with Delegate=yes, or `systemd-run -p Delegate=yes ...`), or enable them from the parent cgroup " +
		"(`echo '+memory +pids +cpu' > PARENT/cgroup.subtree_control`); inside Docker/Kubernetes the container runtime " +
		"must delegate them (cgroup v2 with --cgroupns=private)"
	hintV2InternalProcs = "%[1]s is a delegated root (a container's cgroup namespace) with processes in it, so the " +
		"\"no internal processes\" rule of cgroup v2 forbids enabling controllers for its children: move its processes " +
		"into a leaf first (`mkdir %[1]s/init; for p in $(cat %[1]s/cgroup.procs); do echo $p > %[1]s/init/cgroup.procs; done`), " +
		"then `echo '+memory +pids +cpu' > %[1]s/cgroup.subtree_control` (what Docker-in-Docker entrypoints do)"
)

func (h *host) infoV1() (Info, error) {
	info := Info{Version: 1, Controllers: make(map[string]string)}
	var hints []string
	addHint := func(hint string) {
		if len(hints) == 0 || hints[len(hints)-1] != hint {
			hints = append(hints, hint)
		}
	}
	for _, ctrl := range v1Hierarchies {
		needed := ctrl != "cpuacct"
		mnt, ok := h.v1[ctrl]
		if !ok {
			if needed {
				info.Missing = append(info.Missing, ctrl)
				addHint(hintV1NotMounted)
			} else {
				info.Warnings = append(info.Warnings, "cpuacct is not mounted: Stats.CPU will be 0")
			}
			continue
		}
		ro, err := readOnly(mnt)
		if err != nil {
			return Info{}, err
		}
		if ro {
			if needed {
				info.Missing = append(info.Missing, ctrl)
				addHint(hintReadOnly)
			}
			continue
		}
		info.Controllers[ctrl] = mnt
	}
	if mnt, ok := info.Controllers["memory"]; ok {
		if _, err := os.Stat(filepath.Join(mnt, tcpLimitFile)); err == nil {
			info.Sockets = tcpLimitFile
		} else {
			info.Missing = append(info.Missing, SocketMemory)
			addHint(hintV1NoTCP)
		}
	}
	if mnt, ok := info.Controllers["memory"]; ok && !hasMemsw(mnt) {
		info.Warnings = append(info.Warnings, "no memory.memsw.* (swap accounting off, swapaccount=0): "+
			"swap is kept out with memory.swappiness=0 instead of a memory+swap limit (swapaccount=1 on the kernel command line restores it)")
	}
	info.Hint = strings.Join(hints, "; ")
	return info, nil
}

// hasMemsw reports whether the v1 memory hierarchy mounted at mnt accounts
// swap (the root cgroup has the same files as every other one).
func hasMemsw(mnt string) bool {
	_, err := os.Stat(filepath.Join(mnt, "memory.memsw.limit_in_bytes"))
	return err == nil
}

func (h *host) infoV2() (Info, error) {
	root := h.v2root
	info := Info{Version: 2, Controllers: make(map[string]string)}
	avail, err := readWords(root, "cgroup.controllers")
	if err != nil {
		return Info{}, err
	}
	enabled, err := readWords(root, "cgroup.subtree_control")
	if err != nil {
		return Info{}, err
	}
	ro, err := readOnly(root)
	if err != nil {
		return Info{}, err
	}
	busy, err := internalProcesses(root)
	if err != nil {
		return Info{}, err
	}
	var notDelegated, blocked bool
	for _, ctrl := range neededV2 {
		switch {
		case !avail[ctrl]:
			notDelegated = true
		case ro:
		case !enabled[ctrl] && busy:
			blocked = true
		default:
			info.Controllers[ctrl] = root
			continue
		}
		info.Missing = append(info.Missing, ctrl)
	}
	var hints []string
	if notDelegated {
		hints = append(hints, fmt.Sprintf(hintV2NotDelegated, root))
	}
	if hints, err = h.socketsV2(&info, hints); err != nil {
		return Info{}, err
	}
	if ro && len(info.Missing) > 0 {
		hints = append(hints, hintReadOnly)
	}
	if blocked {
		hints = append(hints, fmt.Sprintf(hintV2InternalProcs, root))
	}
	info.Hint = strings.Join(hints, "; ")
	return info, nil
}

// noSocketAccounting reports whether the kernel was booted with
// cgroup.memory=nosocket (a comma-separated list: "nokmem,nosocket" too),
// which on v2 keeps socket buffers out of every memory cgroup
// (mm/memcontrol.c, cgroup_memory_nosocket).
func (h *host) noSocketAccounting() (bool, error) {
	path := h.cmdline
	if path == "" {
		path = "/proc/cmdline"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("cgroup: read the kernel command line: %w", err)
	}
	for _, arg := range strings.Fields(string(b)) {
		if arg == "--" {
			break // the rest is for init
		}
		if v, ok := strings.CutPrefix(arg, "cgroup.memory="); ok && slices.Contains(strings.Split(v, ","), "nosocket") {
			return true, nil
		}
	}
	return false, nil
}

// internalProcesses reports whether controllers cannot be enabled below the
// v2 root because processes live in it. Only the real root is exempt from
// the "no internal processes" rule, and only non-root cgroups have a
// cgroup.type file; a cgroup namespace root (a container's /sys/fs/cgroup)
// has one.
func internalProcesses(root string) (bool, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.type")); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	procs, err := cgroups.GetPids(root)
	if err != nil {
		return false, fmt.Errorf("cgroup: read %s: %w", filepath.Join(root, "cgroup.procs"), err)
	}
	return len(procs) > 0, nil
}

// readWords reads a space-separated cgroup file such as cgroup.controllers
// into a set.
func readWords(dir, file string) (map[string]bool, error) {
	data, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return nil, fmt.Errorf("cgroup: read %s: %w", filepath.Join(dir, file), err)
	}
	set := make(map[string]bool)
	for _, w := range strings.Fields(data) {
		set[strings.TrimPrefix(w, "+")] = true
	}
	return set, nil
}

// readOnly reports whether path is on a read-only mount, where no cgroup
// can be created whatever the controllers say.
func readOnly(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return st.Flags&unix.ST_RDONLY != 0, nil
}

// socketsV2 records how v2 bounds a run's socket buffers (memory.max), or
// that it cannot (cgroup.memory=nosocket) with its fix among hints.
func (h *host) socketsV2(info *Info, hints []string) ([]string, error) {
	nosocket, err := h.noSocketAccounting()
	if err != nil {
		return hints, err
	}
	if nosocket {
		info.Missing = append(info.Missing, SocketMemory)
		return append(hints, hintV2NoSocket), nil
	}
	info.Sockets = "memory.max"
	return hints, nil
}
