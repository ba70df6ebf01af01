package result

// The limits that can end a run, the values of Result.Limit. Each belongs to
// one status: LimitStatus gives it.
const (
	LimitWallTime = "wall_time" // status timeout: the wall clock of the run
	LimitCPUTime  = "cpu_time"  // status timeout: RLIMIT_CPU of a process, a second line behind the wall clock
	LimitMemory   = "memory"    // status memory_limit: the cgroup's memory limit, enforced by the OOM killer
	LimitStdout   = "stdout"    // status output_limit: the stdout cap
	LimitStderr   = "stderr"    // status output_limit: the stderr cap
)

// LimitNames returns every value Result.Limit can take, in documentation
// order.
func LimitNames() []string {
	return []string{LimitWallTime, LimitCPUTime, LimitMemory, LimitStdout, LimitStderr}
}

// LimitStatus returns the status a run ended by limit has, or "" for a
// string that is not one of LimitNames.
func LimitStatus(limit string) Status {
	switch limit {
	case LimitWallTime, LimitCPUTime:
		return StatusTimeout
	case LimitMemory:
		return StatusMemoryLimit
	case LimitStdout, LimitStderr:
		return StatusOutputLimit
	default:
		return ""
	}
}

// The limits a program can run into without nsbox ending the run, the
// values of Result.LimitsReached: the program's call fails (ENOSPC) and it
// carries on or not, so the status stays what its exit says.
const (
	ReachedWorkspaceSize   = "workspace_size"   // /workspace had no free space left when the program ended
	ReachedWorkspaceInodes = "workspace_inodes" // /workspace had no free inode left when the program ended
)

// ReachedNames returns every value Result.LimitsReached can hold, in
// documentation order, the order it lists them in.
func ReachedNames() []string { return []string{ReachedWorkspaceSize, ReachedWorkspaceInodes} }

// Limits are the effective limits of a run: the policy's, after narrowing on
// the command line. The cgroup limits are nil when no cgroup is active.
type Limits struct {
	TimeoutMS     int64    `json:"timeout_ms"`      // wall clock
	CPUTimeMS     int64    `json:"cpu_time_ms"`     // RLIMIT_CPU of each process
	OutputBytes   int64    `json:"output_bytes"`    // cap per stream
	MemoryBytes   *int64   `json:"memory_bytes"`    // cgroup memory (swap off); nil when no cgroup is active
	Pids          *int64   `json:"pids"`            // cgroup pids.max; nil when no cgroup
	CPUs          *float64 `json:"cpus"`            // cgroup CPU quota in CPUs; nil when no cgroup
	OpenFiles     int64    `json:"open_files"`      // RLIMIT_NOFILE
	FileSizeBytes int64    `json:"file_size_bytes"` // RLIMIT_FSIZE
	StackBytes    int64    `json:"stack_bytes"`     // RLIMIT_STACK
	TmpBytes      int64    `json:"tmp_bytes"`       // /tmp tmpfs size
	ShmBytes      int64    `json:"shm_bytes"`       // /dev/shm tmpfs size
	// The bounds of /workspace: the fresh tmpfs's size and inodes, or the
	// filesystem of a caller's directory that is no larger than the
	// policy's; nil when nothing bounds it.
	WorkspaceBytes  *int64 `json:"workspace_bytes"`
	WorkspaceInodes *int64 `json:"workspace_inodes"`
}

// The namespaces a run can be in, the values of Sandbox.Namespaces.
const (
	NamespaceUser    = "user"
	NamespaceMount   = "mount"
	NamespacePID     = "pid"
	NamespaceNetwork = "network"
	NamespaceIPC     = "ipc"
	NamespaceUTS     = "uts"
	NamespaceCgroup  = "cgroup"
)

// NamespaceNames returns every namespace name, in documentation order, the
// order Sandbox.Namespaces lists them in.
func NamespaceNames() []string {
	return []string{
		NamespaceUser, NamespaceMount, NamespacePID, NamespaceNetwork,
		NamespaceIPC, NamespaceUTS, NamespaceCgroup,
	}
}

// The values of Sandbox.Cgroup.
const (
	CgroupV1   = "v1"
	CgroupV2   = "v2"
	CgroupNone = "none"
)

// CgroupNames returns every value Sandbox.Cgroup can take, in documentation
// order.
func CgroupNames() []string { return []string{CgroupV1, CgroupV2, CgroupNone} }

// SeccompNone is Sandbox.Seccomp when no seccomp filter was installed.
const SeccompNone = "none"

// The values of Sandbox.MemfdNoexec: what kept the program from executing
// a file it made in memory (memfd_create), which the noexec mounts do not
// cover.
const (
	MemfdNoexecSeccomp = "seccomp" // the seccomp filter refused memfd_create (every built-in profile)
	MemfdNoexecNone    = "none"    // nothing: no filter, or a profile of the user's own
)

// MemfdNoexecNames returns every value Sandbox.MemfdNoexec can take, in
// documentation order.
func MemfdNoexecNames() []string { return []string{MemfdNoexecSeccomp, MemfdNoexecNone} }

// The values of Sandbox.HostIDs: whose host uid the program ran as.
const (
	HostIDsOwn    = "own"    // the run's own: a pair of ids no other run or user has (root mode, or rootless with subordinate ids)
	HostIDsShared = "shared" // the caller's: rootless with the caller's uid mapped alone
)

// HostIDsNames returns every value Sandbox.HostIDs can take, in
// documentation order.
func HostIDsNames() []string { return []string{HostIDsOwn, HostIDsShared} }

// Sandbox says which protections were active in a run.
type Sandbox struct {
	Namespaces  []string `json:"namespaces"`   // namespaces the run was in, in NamespaceNames order; written as [] when nil
	Cgroup      string   `json:"cgroup"`       // CgroupV1, CgroupV2 or CgroupNone
	Seccomp     string   `json:"seccomp"`      // profile name ("strict", "default"), the profile's path, or SeccompNone
	LandlockABI int      `json:"landlock_abi"` // Landlock ABI version enforced; 0 when not active
	MemfdNoexec string   `json:"memfd_noexec"` // MemfdNoexecSeccomp or MemfdNoexecNone
	Rootless    bool     `json:"rootless"`     // nsbox ran without host root, in its own user namespace
	HostIDs     string   `json:"host_ids"`     // HostIDsOwn or HostIDsShared
}

// Int64 returns a pointer to v, for the optional fields of Result and Limits.
func Int64(v int64) *int64 { return &v }

// Float64 returns a pointer to v, for Limits.CPUs.
func Float64(v float64) *float64 { return &v }
