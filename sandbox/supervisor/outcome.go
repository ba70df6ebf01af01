package supervisor

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
)

// setExit fills exit_code or signal from the program's wait status.
func setExit(r *result.Result, ws syscall.WaitStatus) {
	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		r.ExitCode = &c
	case ws.Signaled():
		s := int(ws.Signal())
		r.Signal = &s
	}
}

// usage copies the cgroup's final counters into r and returns them; the
// zero Stats when the run had no cgroup or they cannot be read.
func (c confinement) usage(r *result.Result) cgroup.Stats {
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
//   - SIGKILL that nsbox did not send, no OOM kill, and the namespace
//     used up the CPU time: RLIMIT_CPU (soft == hard makes the kernel send
//     SIGKILL). A SIGKILL from inside (the program's own, a child's) uses
//     no such time and is an error like any other signal.
//   - Otherwise ok for exit 0 and error for the rest.
func classify(r *result.Result, pl *plan.Plan, st cgroup.Stats, ps *os.ProcessState) {
	killed := r.Signal != nil && *r.Signal == int(unix.SIGKILL)
	var cpu time.Duration // the namespace's, from the init; nil after an early end, which is never a kill
	if ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	switch {
	case st.OOMKills > 0 && (r.ExitCode == nil || *r.ExitCode != 0):
		r.Status, r.Limit = result.StatusMemoryLimit, result.LimitMemory
		r.Reason = fmt.Sprintf("%s reached: the OOM killer ended %d process(es)", pl.Reasons.Memory, st.OOMKills)
	case killed && cpu >= pl.CPUTime-100*time.Millisecond:
		r.Status, r.Limit = result.StatusTimeout, result.LimitCPUTime
		r.Reason = pl.Reasons.CPU
	case r.ExitCode != nil && *r.ExitCode == 0:
		r.Status = result.StatusOK
	default:
		r.Status = result.StatusError
	}
}
