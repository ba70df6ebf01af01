package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/seccomp"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// namespaceNames are the namespaces of cloneFlags, as the result reports
// them.
var namespaceNames = []string{"user", "mount", "pid", "network", "ipc", "uts", "cgroup"}

// confinement is what a run enforces beyond its namespaces and mounts,
// decided on the host before the init starts.
type confinement struct {
	cg          *cgroup.Cgroup   // nil when the run has no cgroup
	seccomp     *seccomp.Program // the compiled filter; nil for none
	seccompName string           // profile name or path; "none"
	landlockABI int              // Landlock ABI the init will enforce; 0 for none
}

// requirements refuses a run whose policy requires a protection this host
// cannot give, with the fix `nsbox doctor` would print. It runs first, so a
// refused run leaves nothing behind.
func requirements(p *policies.Policy) error {
	if err := hostcheck.Require(p.Sandbox.Require); err != nil {
		return &stepError{"requirements", err}
	}
	return nil
}

// confine prepares each protection the policy uses. A required protection the host lacks refuses the run
// before anything starts (fail closed); one that is used but not required
// is left out and the result says so.
func confine(p *policies.Policy, id, stateDir string) (c *confinement, err error) {
	c = &confinement{seccompName: "none"}
	defer func() {
		if err != nil {
			c.destroy()
		}
	}()

	// Seccomp: loaded, checked and compiled here, on the host, so that the
	// process that becomes the sandbox never runs libseccomp (the init
	// loads the raw filter with one system call), and so that a bad
	// profile refuses the run before anything starts. The filter comes
	// from the state directory's cache (STATE/cache/seccomp): by the
	// profile's exact bytes when this nsbox binary saw them before
	// (nothing parsed), else by its parsed rules; a cache that cannot be
	// read or written only means parsing and compiling (see
	// seccomp.Cache.Load).
	if p.Sandbox.Seccomp != "none" {
		if ok, why := seccomp.Supported(); ok {
			cache := seccomp.Cache{Dir: filepath.Join(stateDir, "cache", "seccomp")}
			c.seccomp, err = cache.Load(p.Sandbox.Seccomp)
			if err != nil {
				return nil, &stepError{"seccomp", err}
			}
			c.seccompName = p.Sandbox.Seccomp
		} else if p.Requires("seccomp") {
			return nil, &stepError{"requirements", fmt.Errorf("seccomp: %s", why)}
		}
	}

	// Landlock is applied by the init; the ABI is the kernel's, the same
	// number the init sees.
	if p.Sandbox.Landlock {
		if abi, err := llsys.LandlockGetABIVersion(); err == nil && abi > 0 {
			c.landlockABI = abi
		} else if p.Requires("landlock") {
			return nil, &stepError{"requirements", fmt.Errorf("landlock: not available (%v)", err)}
		}
	}

	// Cgroup last: it is the one protection that leaves state on the host.
	// Leftovers of supervisors that died mid-run go first.
	info, err := cgroup.Detect()
	switch {
	case err == nil && len(info.Missing) == 0:
		prefix := cgroupPrefix(stateDir)
		cgroup.Sweep(func(name string) bool {
			id, ours := strings.CutPrefix(name, prefix)
			return !ours || runLive(stateDir, id)
		})
		c.cg, err = cgroup.New(prefix+id, cgroup.Limits{
			MemoryBytes: int64(p.Limits.Memory),
			Pids:        p.Limits.Pids,
			CPUs:        p.Limits.CPUs,
		})
		if err != nil {
			return nil, &stepError{"cgroup", err}
		}
	case p.Requires("cgroups"):
		if err == nil {
			err = fmt.Errorf("controllers %v missing: %s", info.Missing, info.Hint)
		}
		return nil, &stepError{"requirements", fmt.Errorf("cgroups: %w", err)}
	}
	return c, nil
}

// compile returns the raw seccomp filter for the spec; nil when the run
// has none. confine already loaded it (from the cache or compiled, see
// there), so this costs nothing; it stays a step of its own so that the
// spec's filter is named in one place.
func (c *confinement) compile() ([]byte, error) {
	if c.seccomp == nil {
		return nil, nil
	}
	return c.seccomp.Raw, nil
}

// destroy kills whatever is left in the run's cgroup and removes it.
func (c *confinement) destroy() error {
	if c == nil || c.cg == nil {
		return nil
	}
	return c.cg.Destroy()
}

// rlimits are the program's resource limits: no core dumps (a dump could
// fill the workspace or leak memory contents), bounded descriptors, file
// size and stack, and CPU seconds. RLIMIT_CPU has soft == hard so that
// the kernel sends SIGKILL, which reaches the program even as PID 1
// (SIGXCPU, sent at a lower soft limit, would be ignored there). There is
// deliberately no RLIMIT_AS: address space is not memory (JITs and
// numeric libraries reserve far more than they use); memory is the
// cgroup's job.
func rlimits(l policies.Limits) []spec.Rlimit {
	secs := uint64(l.CPUTime.Duration / time.Second)
	return []spec.Rlimit{
		{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
		{Resource: unix.RLIMIT_NOFILE, Cur: uint64(l.OpenFiles), Max: uint64(l.OpenFiles)},
		{Resource: unix.RLIMIT_FSIZE, Cur: uint64(l.FileSize), Max: uint64(l.FileSize)},
		{Resource: unix.RLIMIT_STACK, Cur: uint64(l.Stack), Max: uint64(l.Stack)},
		{Resource: unix.RLIMIT_CPU, Cur: secs, Max: secs},
	}
}

// limitsOf returns the effective limits of a run under p; the cgroup
// limits only when a cgroup enforces them.
func limitsOf(p *policies.Policy, cgroupActive bool) *result.Limits {
	l := &result.Limits{
		TimeoutMS:     p.Limits.Timeout.Milliseconds(),
		CPUTimeMS:     p.Limits.CPUTime.Milliseconds(),
		OutputBytes:   int64(p.Limits.OutputLimit),
		OpenFiles:     p.Limits.OpenFiles,
		FileSizeBytes: int64(p.Limits.FileSize),
		StackBytes:    int64(p.Limits.Stack),
		TmpBytes:      int64(p.Filesystem.TmpSize),
		ShmBytes:      int64(p.Filesystem.ShmSize),
	}
	if cgroupActive {
		l.MemoryBytes = result.Int64(int64(p.Limits.Memory))
		l.Pids = result.Int64(p.Limits.Pids)
		l.CPUs = result.Float64(p.Limits.CPUs)
	}
	return l
}

// report describes the effective limits and active protections.
func (c *confinement) report(p *policies.Policy) (*result.Limits, *result.Sandbox) {
	sb := &result.Sandbox{
		Namespaces:  namespaceNames,
		Cgroup:      "none",
		Seccomp:     c.seccompName,
		LandlockABI: c.landlockABI,
	}
	if c.cg != nil {
		sb.Cgroup = fmt.Sprintf("v%d", c.cg.Version())
	}
	return limitsOf(p, c.cg != nil), sb
}

// cgroupPrefix starts the cgroup names of runs that keep their run
// directories in stateDir: "s" and 8 hex digits of the directory's hash,
// then "-". A supervisor can only tell whether runs of its own state
// directory are live (by their lock), so it sweeps only cgroups with its
// own prefix; runs with another NSBOX_STATE_DIR are left to theirs.
func cgroupPrefix(stateDir string) string {
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(stateDir))
	return "s" + hex.EncodeToString(sum[:4]) + "-"
}

// runLive reports whether the run id still has a supervisor: its run
// directory's lock is held. Used to tell a crashed run's cgroup from a
// running one.
func runLive(stateDir, id string) bool {
	f, err := os.OpenFile(filepath.Join(runsDir(stateDir), id, "lock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// cgroupTasks opens the run cgroup's v1 tasks files (cgroup.OpenTasks)
// for the init, which attaches its own thread with them right after
// reading the spec, and names them for the spec by the descriptors they
// get in the init, from first on. There are none on v2, where the init is
// cloned into its cgroup, nor for a run without a cgroup.
//
// The supervisor no longer writes the init's pid to cgroup.procs: that
// takes a global lock and an RCU grace period (6-17 ms while the init
// starts up) where a thread writing "0" to tasks takes microseconds.
// What changes, all before the program runs: the init's Go runtime
// start-up and its other threads stay in nsbox's own cgroup until they
// die at execve; its memory is charged to the memcg of its first thread
// (the mm owner), which may be one of them; the run's pids and cpuacct
// counters start at the attach. execve gives the program a new mm owned
// by the attached thread, so from its first instruction everything is
// charged to the run. Killing a half set-up init needs no cgroup: it is
// PID 1 of its namespace and the supervisor's child (stopper.stop
// signals it first).
func cgroupTasks(cg *cgroup.Cgroup, first int) ([]*os.File, []spec.TasksFile, error) {
	if cg == nil {
		return nil, nil, nil
	}
	if _, ok := cg.FD(); ok {
		return nil, nil, nil // v2: CLONE_INTO_CGROUP places it at birth
	}
	files, err := cg.OpenTasks()
	if err != nil {
		return nil, nil, &stepError{"cgroup", err}
	}
	tasks := make([]spec.TasksFile, len(files))
	for i, f := range files {
		tasks[i] = spec.TasksFile{FD: first + i, Path: f.Name()}
	}
	return files, tasks, nil
}

// usage copies the cgroup's final counters into r and returns them; the
// zero Stats when the run had no cgroup or they cannot be read.
func (c *confinement) usage(r *result.Result) cgroup.Stats {
	if c.cg == nil {
		return cgroup.Stats{}
	}
	st, err := c.cg.Stats()
	if err != nil {
		return cgroup.Stats{}
	}
	r.CPUMS = result.Int64(st.CPU.Milliseconds())
	r.PeakMemoryBytes = result.Int64(int64(st.PeakMemory))
	return st
}

// classify sets the status of a run that nsbox did not stop itself.
//
//   - The OOM killer struck and the program did not exit 0: memory_limit.
//     (A child killed by the OOM killer whose parent carried on to a clean
//     exit is the program's business.)
//   - SIGKILL that nsbox did not send and no OOM kill: nothing inside can
//     SIGKILL PID 1 of its own namespace, so this is RLIMIT_CPU (soft ==
//     hard makes the kernel send SIGKILL); the CPU time confirms it.
//   - Otherwise ok for exit 0 and error for the rest.
func classify(r *result.Result, p *policies.Policy, st cgroup.Stats, ps *os.ProcessState) {
	killed := r.Signal != nil && *r.Signal == int(unix.SIGKILL)
	cpu := ps.UserTime() + ps.SystemTime()
	switch {
	case st.OOMKills > 0 && (r.ExitCode == nil || *r.ExitCode != 0):
		r.Status, r.Limit = result.StatusMemoryLimit, result.LimitMemory
		r.Reason = fmt.Sprintf("memory limit %v reached: the OOM killer ended %d process(es)", p.Limits.Memory, st.OOMKills)
	case killed && cpu >= p.Limits.CPUTime.Duration-100*time.Millisecond:
		r.Status, r.Limit = result.StatusTimeout, result.LimitCPUTime
		r.Reason = fmt.Sprintf("cpu time %v (RLIMIT_CPU)", p.Limits.CPUTime)
	case r.ExitCode != nil && *r.ExitCode == 0:
		r.Status = result.StatusOK
	default:
		r.Status = result.StatusError
	}
}
