// Package plan is the plan of one run: every value the supervisor, the
// init and the Python runner act on, as sandbox/planner decides it from a
// policy, the caller's flags and what the host can enforce (Host, read by
// ReadHost). The supervisor executes a Plan; neither it nor this package
// knows what a policy is.
package plan

import (
	"time"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Plan is everything one run needs to know, and nothing it does not.
type Plan struct {
	// Policy identifies the policy in the result and the audit log.
	Policy Policy `json:"policy"`
	// Root is the root filesystem to open and how hard to check it.
	Root Root `json:"root"`

	// Timeout is the wall-clock limit; OutputLimit caps each stream;
	// ProgramSize is the largest program the caller may hand in.
	Timeout     time.Duration `json:"timeout"`
	OutputLimit int64         `json:"output_limit"`
	ProgramSize int64         `json:"program_size"`
	// OutputTruncate: a stream past OutputLimit keeps its head and its
	// tail and the program goes on; otherwise the run is killed.
	OutputTruncate bool `json:"output_truncate"`
	// CPUTime is RLIMIT_CPU (also in Rlimits), kept to classify a kill.
	CPUTime time.Duration `json:"cpu_time"`

	// Cgroup holds the cgroup limits; nil when the run gets no cgroup
	// (the host lacks one and the policy does not require it).
	Cgroup *cgroup.Limits `json:"cgroup"`
	// Seccomp is the filter to load: a built-in name (with
	// seccomp.LoopbackSuffix for a policy's loopback_sockets or
	// seccomp.ProxySuffix for its network allowlist, then
	// seccomp.NoProcSuffix when it denies every process-creation event)
	// or an absolute path; "" for none.
	Seccomp string `json:"seccomp"`
	// MemfdNoexec is what keeps the program from executing a file it
	// makes in memory, as the result reports it: result.MemfdNoexecSeccomp
	// when the filter refuses memfd_create, else result.MemfdNoexecNone.
	MemfdNoexec string `json:"memfd_noexec"`
	// LandlockABI is the kernel's Landlock ABI the init will use; 0 for
	// no Landlock.
	LandlockABI int `json:"landlock_abi"`

	// Rlimits, Env, TmpSize and ShmSize go into the init's spec as they are.
	Rlimits []spec.Rlimit `json:"rlimits"`
	Env     []string      `json:"env"`
	TmpSize int64         `json:"tmp_size"`
	ShmSize int64         `json:"shm_size"`

	// Workspace bounds /workspace.
	Workspace Workspace `json:"workspace"`

	// Network is network allowlist mode: the proxy the supervisor serves
	// on the run's loopback and what it lets through; nil for no network
	// (loopback only).
	Network *Network `json:"network,omitempty"`

	// Runner is the Python runner's config but for its report descriptor,
	// which the supervisor assigns (spec.Layout).
	Runner pyrunner.Config `json:"runner"`

	// Limits are the effective limits as the result reports them; the
	// cgroup ones are set when Cgroup is.
	Limits result.Limits `json:"limits"`
	// Reasons word the limits for a result's reason, as the policy wrote
	// them.
	Reasons Reasons `json:"reasons"`
}

// Workspace bounds /workspace: the fresh tmpfs gets these bounds; a
// caller's directory is bounded only by its filesystem, when that is no
// larger than them.
type Workspace struct {
	Size   int64 `json:"size"`   // bytes
	Inodes int64 `json:"inodes"` // files, directories and links
	// RequireBounded refuses a caller's directory whose filesystem is
	// larger than Size or Inodes (the policy requires bounded_workspace).
	RequireBounded bool `json:"require_bounded"`
}

// Network is what the proxy of allowlist mode allows (docs/network.md).
type Network struct {
	Allow          []string `json:"allow"`           // "host:port" entries, as sandbox/netproxy.ParseRule reads them
	MaxConnections int64    `json:"max_connections"` // at once
	MaxBytes       int64    `json:"max_bytes"`       // through the proxy in the run, both ways
}

// Policy is what the result and the audit log record of the policy.
type Policy struct {
	Name      string `json:"name"`       // built-in name or the path given
	SHA256    string `json:"sha256"`     // policies.Policy.SHA256
	StoreCode bool   `json:"store_code"` // keep the program's source in the audit log
}

// Root names the root filesystem.
type Root struct {
	Name string `json:"name"` // a built-in root's name or the absolute path of a root
	Full bool   `json:"full"` // re-hash every file against the manifest before the run
}

// Reasons are the limits as a result's reason quotes them.
type Reasons struct {
	Wall   string `json:"wall"`   // "wall clock 10s"
	CPU    string `json:"cpu"`    // "cpu time 10s (RLIMIT_CPU)"
	Memory string `json:"memory"` // "memory limit 256MiB"
}

// LimitsWithoutCgroup returns the plan's limits as reported when no
// cgroup enforces them (a run that failed before its cgroup existed).
func (p *Plan) LimitsWithoutCgroup() *result.Limits {
	l := p.Limits
	l.MemoryBytes, l.Pids, l.CPUs = nil, nil, nil
	return &l
}
