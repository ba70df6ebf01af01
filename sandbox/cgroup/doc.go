// Package cgroup gives one sandbox run its own cgroup and enforces the run's
// memory, process-count and CPU limits there, on cgroup v2 (unified) hosts
// and on cgroup v1 (or hybrid) hosts.
//
// # Layout
//
// A run's cgroup is <hierarchy root>/<parent>/<name>: the parent is
// DefaultParent ("nsbox") unless a caller (a test) names another one, and the
// name is the run ID. On v1 the same relative path is created in every
// hierarchy a run needs (memory, pids, cpu, cpuacct, freezer), wherever each
// is mounted (separately, or co-mounted as "cpu,cpuacct"). On v2 it is
// created once under the unified root, after +memory +pids +cpu were enabled
// in the cgroup.subtree_control of the root and of every directory of the
// parent, since a v2 controller only reaches a cgroup whose ancestors all
// delegate it.
//
// # Life of a run's cgroup, in the supervisor's order
//
//	Detect    once, for `nsbox doctor` and to fail closed early
//	New       create the cgroup and set the limits, before the init exists
//	FD /      v2: clone3(CLONE_INTO_CGROUP) with FD, so the init is never
//	OpenTasks outside; v1: the init is handed the tasks files and writes
//	          "0" to each, attaching the thread that will execve the
//	          program before any setup step (Add, which moves a whole
//	          process by pid, is for tests and tools)
//	Kill      on timeout or stop: kill every process in the cgroup
//	Stats     CPU time, peak memory, OOM kills, pids.max hits
//	Destroy   kill whatever is left, remove the directories
//	Sweep     at start-up: remove the cgroups of runs whose supervisor died
//
// # What comes from where
//
// The opencontainers/cgroups managers fs (v1) and fs2 (v2) write the limits
// (with their ordering rules, e.g. memsw after memory), freeze and thaw, list
// processes and remove directories. This package decides the layout, checks
// that the host can actually enforce every limit (New refuses when a
// controller is missing: a run without its limits is not started), and adds
// what those managers do not do: exclusive creation (a leftover cgroup of the
// same name is never adopted), delegating the controllers to the parent on
// v2, the v1 limit of socket buffers (memory.kmem.tcp, which the v1 manager
// no longer writes and without which the kernel charges them to the host),
// killing until the cgroup is empty, and sweeping leftovers.
//
// # Rootless mode
//
// Without host root (userns.Rootless), nsbox can create cgroups only in a
// cgroup v2 subtree delegated to its user, the way systemd delegates one
// with Delegate=yes: the directory, cgroup.procs, cgroup.subtree_control
// and cgroup.threads owned by the user. That subtree is the cgroup nsbox
// was started in (Info.Delegation), and runs are created below it, never
// above it:
//
//	<subtree>/                    +memory +pids +cpu in cgroup.subtree_control
//	<subtree>/nsbox-supervisor/   nsbox's own processes (LeafName)
//	<subtree>/nsbox/<name>        the runs, as under the v2 root as root
//
// cgroup v2 enables a controller for a cgroup's children only while the
// cgroup holds no process ("no internal processes"), so nsbox first moves
// itself out of the subtree into LeafName (PrepareDelegated, or New); a
// subtree that holds other processes (the shell that started nsbox, say)
// cannot be used. cgroup v1 cannot be delegated at all. Where there is no
// usable subtree, Detect reports the controllers missing, why, and the fix.
//
// # Socket buffers
//
// The memory limit covers the run's socket buffers on both versions. v2
// charges them to memory.max (unless booted with cgroup.memory=nosocket,
// which Detect reports as missing). v1 charges them to a counter of their
// own, memory.kmem.tcp, from its first limit on: New writes
// Limits.SocketBytes there and MemoryBytes-SocketBytes to
// memory.limit_in_bytes, so the two stay within MemoryBytes.
package cgroup
