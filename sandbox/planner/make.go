// Package planner turns a policy, the caller's flags and what this host
// can enforce into the plan of one run (sandbox/plan): every value the
// supervisor, the init and the Python runner act on, decided in one pure
// function, Make, and in no other place. It is the one package between
// policies and the run: the supervisor and the init never read a policy.
//
// Make is pure: the same policy, flags and host always give the same
// plan, which the golden tests in testdata pin (policy file in, plan
// out). Reading the host is plan.ReadHost's.
//
// Fail closed: a protection the policy requires and the host cannot give
// is an error here, before anything is created; a protection the policy
// uses but does not require is left out of the plan when the host lacks
// it, and the result says what was active.
package planner

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/seccomp"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Flags are the caller's choices for one run. Limits only narrow the
// policy's (policies.Overrides); zero means "not given".
type Flags struct {
	Timeout     time.Duration // --timeout
	OutputLimit int64         // --output-limit, bytes
	CheckOnly   bool          // nsbox check: run only the runner's static check
	Filename    string        // the program's name in tracebacks; "" for pyrunner.DefaultFilename
	// Warm is set for a sandbox started before its program arrives (the
	// service's pool, a session): the runner imports the policy's
	// allowlist.preload while it waits. A cold run leaves it unset: it
	// would only add the imports' time to the run.
	Warm bool
	// NoNetwork turns a policy's network allowlist mode off for this run
	// (--network none): loopback only. Nothing turns it on.
	NoNetwork bool
	// Outputs asks the runner for display outputs after the program
	// (the service's runs, as its sessions' cells have them): a final
	// bare expression's value, the matplotlib figures left open.
	Outputs bool
}

// Make is the one translation of a policy into a run: it narrows the
// policy by the flags, refuses what the host cannot enforce but the policy
// requires, and decides every value of the run. It does not change p.
//
// Errors are *result.SandboxError: step "policy" for a refused flag (the
// plan is nil), "requirements" for a protection the host lacks. A refused
// run still gets its plan, without the protections, so that its result
// can say what the run would have been limited to.
func Make(p *policies.Policy, f Flags, h plan.Host) (*plan.Plan, error) {
	q := *p // Narrow changes the limits: work on a copy
	if err := q.Narrow(policies.Overrides{Timeout: f.Timeout, OutputLimit: f.OutputLimit}); err != nil {
		return nil, result.StepError("policy", err)
	}
	pl := &plan.Plan{
		Policy:      plan.Policy{Name: q.Name, SHA256: q.SHA256, StoreCode: q.Audit.StoreCode},
		Root:        plan.Root{Name: q.Python.Root, Full: q.Python.Verify == policies.VerifyFull},
		Timeout:     q.Limits.Timeout.Duration,
		OutputLimit: int64(q.Limits.OutputLimit),
		// Absent is kill: what a policy written before the key meant.
		OutputTruncate: q.Limits.OutputMode == policies.OutputTruncate,
		ProgramSize:    int64(q.Limits.ProgramSize),
		CPUTime:        q.Limits.CPUTime.Duration,
		Rlimits:        rlimits(q.Limits),
		Env:            env(&q),
		TmpSize:        int64(q.Filesystem.TmpSize),
		ShmSize:        int64(q.Filesystem.ShmSize),
		Runner:         runner(&q, f),
		Workspace: plan.Workspace{
			Size:           int64(q.Limits.WorkspaceSize),
			Inodes:         q.Limits.WorkspaceInodes,
			RequireBounded: q.Requires(hostcheck.BoundedWorkspace),
		},
		Reasons: plan.Reasons{
			// Each limit worded as the result has always quoted it.
			Wall:   "wall clock " + q.Limits.Timeout.Duration.String(),
			CPU:    fmt.Sprintf("cpu time %v (RLIMIT_CPU)", q.Limits.CPUTime),
			Memory: fmt.Sprintf("memory limit %v", q.Limits.Memory),
		},
	}
	if q.Allowlisted() && !f.NoNetwork {
		pl.Network = &plan.Network{
			Allow:          q.Network.Allow,
			MaxConnections: q.Network.MaxConnections,
			MaxBytes:       int64(q.Network.MaxBytes),
		}
		pl.Env = append(pl.Env, spec.ProxyEnv...)
	}
	pl.Limits = limits(&q, false)
	if h.Unmet != nil {
		return pl, result.StepError("requirements", h.Unmet)
	}
	if err := protections(pl, &q, h); err != nil {
		return pl, err
	}
	pl.Limits = limits(&q, pl.Cgroup != nil)
	return pl, nil
}

// protections decides seccomp, Landlock and the cgroup: each is used when
// the policy asks for it and the host has it; one the policy requires but
// the host lacks refuses the run.
func protections(pl *plan.Plan, p *policies.Policy, h plan.Host) error {
	refuse := func(what, why string) error {
		pl.Cgroup, pl.Seccomp, pl.LandlockABI, pl.MemfdNoexec = nil, "", 0, result.MemfdNoexecNone
		return result.StepError("requirements", fmt.Errorf("%s: %s", what, why))
	}
	if p.Sandbox.Seccomp != "none" {
		switch {
		case h.Seccomp.OK:
			pl.Seccomp = p.Sandbox.Seccomp
			// The profile's variant compiled with AF_INET and AF_INET6
			// (policy validation allows the switch with built-ins only);
			// in allowlist mode, with the TCP sockets that reach the
			// proxy and no others.
			// (validation refuses the two together).
			switch {
			case p.Sandbox.LoopbackSockets:
				pl.Seccomp += seccomp.LoopbackSuffix
			case pl.Network != nil:
				pl.Seccomp += seccomp.ProxySuffix
			}
			// No new processes, when the Python layer denies them all.
			filter, err := noProc(p, pl.Seccomp)
			if err != nil {
				return refuse("sandbox.seccomp", err.Error())
			}
			pl.Seccomp = filter
		case p.Requires(hostcheck.Seccomp):
			return refuse("seccomp", h.Seccomp.Why)
		}
	}
	pl.MemfdNoexec = result.MemfdNoexecNone
	switch {
	case seccomp.RefusesMemfd(pl.Seccomp):
		pl.MemfdNoexec = result.MemfdNoexecSeccomp
	case p.Requires(hostcheck.MemfdNoexec):
		why := fmt.Sprintf("seccomp filter %q is not known to refuse memfd_create (the built-in profiles are)", pl.Seccomp)
		switch {
		case pl.Seccomp != "":
		case !h.Seccomp.OK:
			why = "needs a built-in seccomp profile, and this host has no seccomp: " + h.Seccomp.Why
		default:
			why = `needs a built-in seccomp profile, and the policy's sandbox.seccomp is "none"`
		}
		return refuse("memfd_noexec", why)
	}
	if p.Sandbox.Landlock {
		switch {
		case h.Landlock.ABI > 0:
			pl.LandlockABI = h.Landlock.ABI
		case p.Requires(hostcheck.Landlock):
			return refuse("landlock", "not available ("+h.Landlock.Why+")")
		}
	}
	switch {
	case h.Cgroup.OK:
		pl.Cgroup = &cgroup.Limits{
			MemoryBytes: int64(p.Limits.Memory),
			SocketBytes: socketBytes(pl.Seccomp, int64(p.Limits.Memory)),
			Pids:        p.Limits.Pids,
			CPUs:        p.Limits.CPUs,
		}
	case p.Requires(hostcheck.Cgroups):
		return refuse("cgroups", h.Cgroup.Why)
	}
	return nil
}

// socketBytes is the part of the memory limit set aside for socket buffers
// on cgroup v1 (cgroup.Limits.SocketBytes): none when the filter is a
// built-in profile without its loopback variant, which refuses every
// socket that has buffers of that kind (AF_INET and AF_INET6; AF_UNIX
// buffers are charged to the memory limit itself); an eighth of it when
// the program can make TCP or UDP sockets (the loopback variant, a profile
// of the user's, or no filter).
func socketBytes(filter string, memory int64) int64 {
	if seccomp.RefusesIPSockets(filter) {
		return 0
	}
	return memory / 8
}

// rlimits are the program's resource limits: no core dumps (a dump could
// fill the workspace or leak memory contents), bounded descriptors, file
// size and stack, and CPU seconds. RLIMIT_CPU has soft == hard so that
// the kernel sends SIGKILL, which reaches the program even as PID 1
// (SIGXCPU, sent at a lower soft limit, would be ignored there). There is
// deliberately no RLIMIT_AS: address space is not memory (JITs and
// numeric libraries reserve far more than they use); memory is the
// cgroup's job.
//
// The three per-user kernel counts a Python program has no use for in
// bulk are fixed, not policy keys (userQuotas): the run's own host uid
// already keeps them from reaching host root or another run; these keep
// one run's use of kernel memory small as well.
func rlimits(l policies.Limits) []spec.Rlimit {
	secs := uint64(l.CPUTime.Duration / time.Second)
	return append([]spec.Rlimit{
		{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
		{Resource: unix.RLIMIT_NOFILE, Cur: uint64(l.OpenFiles), Max: uint64(l.OpenFiles)},
		{Resource: unix.RLIMIT_FSIZE, Cur: uint64(l.FileSize), Max: uint64(l.FileSize)},
		{Resource: unix.RLIMIT_STACK, Cur: uint64(l.Stack), Max: uint64(l.Stack)},
		{Resource: unix.RLIMIT_CPU, Cur: secs, Max: secs},
	}, userQuotas...)
}

// userQuotas bound what the kernel counts per user rather than per
// process, for all the program's processes together:
//   - RLIMIT_SIGPENDING: queued signals (real-time signals, POSIX timers);
//     the standard library queues none beyond one per signal;
//   - RLIMIT_MSGQUEUE: bytes of POSIX message queues, which the standard
//     library does not use (three queues of the default size fit);
//   - RLIMIT_MEMLOCK: locked memory (mlock, SHM_LOCK), which nothing in a
//     sandboxed program needs; it is the kernel's old default.
var userQuotas = []spec.Rlimit{
	{Resource: unix.RLIMIT_SIGPENDING, Cur: 1024, Max: 1024},
	{Resource: unix.RLIMIT_MSGQUEUE, Cur: 256 << 10, Max: 256 << 10},
	{Resource: unix.RLIMIT_MEMLOCK, Cur: 64 << 10, Max: 64 << 10},
}

// env is spec.BaseEnv, the thread-pool sizes from the CPU quota
// (policies.Limits.Threads), then the policy's [env] in name order (the
// policy loader refuses the names nsbox sets).
func env(p *policies.Policy) []string {
	e := slices.Clone(spec.BaseEnv)
	threads := fmt.Sprint(p.Limits.Threads())
	for _, k := range spec.ThreadEnv {
		e = append(e, k+"="+threads)
	}
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e = append(e, k+"="+p.Env[k])
	}
	return e
}

// runner turns the policy's [allowlist] into the runner's config. An
// allowlist of "*" means no import checks at all (Allow nil).
func runner(p *policies.Policy, f Flags) pyrunner.Config {
	c := pyrunner.Config{
		Mode:         pyrunner.ModeRun,
		DenyBuiltins: p.Allowlist.DenyBuiltins,
		DenyEvents:   p.Allowlist.DenyEvents,
		StrictAttrs:  p.Allowlist.StrictAttributes,
		Filename:     f.Filename,
		WritableDirs: spec.WritableDirs,
	}
	if p.Python.Restricted() {
		c.PythonMode = pyrunner.PythonRestricted
	}
	if c.Filename == "" {
		c.Filename = pyrunner.DefaultFilename
	}
	if f.CheckOnly {
		c.Mode = pyrunner.ModeCheck
	}
	if !p.Allowlist.AllowsEverything() {
		c.Allow = p.Allowlist.Imports
	}
	if f.Warm && !f.CheckOnly {
		c.Preload = p.Allowlist.Preload
	}
	c.Outputs = f.Outputs && !f.CheckOnly
	// Allowlist mode: the runner refuses, and reports, every socket route
	// around the proxy (the kernel's namespace and filter stand behind).
	if p.Allowlisted() && !f.NoNetwork {
		c.Proxy = spec.ProxyAddr
	}
	return c
}

// limits are the effective limits as the result reports them; the cgroup
// ones only when a cgroup enforces them.
func limits(p *policies.Policy, cgroupActive bool) result.Limits {
	l := result.Limits{
		TimeoutMS:     p.Limits.Timeout.Milliseconds(),
		CPUTimeMS:     p.Limits.CPUTime.Milliseconds(),
		OutputBytes:   int64(p.Limits.OutputLimit),
		OpenFiles:     p.Limits.OpenFiles,
		FileSizeBytes: int64(p.Limits.FileSize),
		StackBytes:    int64(p.Limits.Stack),
		TmpBytes:      int64(p.Filesystem.TmpSize),
		ShmBytes:      int64(p.Filesystem.ShmSize),
		// The fresh workspace's; the supervisor replaces them for a
		// caller's directory.
		WorkspaceBytes:  result.Int64(int64(p.Limits.WorkspaceSize)),
		WorkspaceInodes: result.Int64(p.Limits.WorkspaceInodes),
	}
	if cgroupActive {
		l.MemoryBytes = result.Int64(int64(p.Limits.Memory))
		l.Pids = result.Int64(p.Limits.Pids)
		l.CPUs = result.Float64(p.Limits.CPUs)
	}
	return l
}
