package supervisor

import (
	"os"
	"sync"
	"syscall"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/result"
)

// stopper kills the run once, remembering the first reason.
type stopper struct {
	mu       sync.Mutex
	proc     *os.Process
	cg       *cgroup.Cgroup // nil without a cgroup
	status   result.Status
	limit    string
	reason   string
	stopped  bool
	finished bool
	done     chan struct{} // closed by finish
	once     sync.Once
}

// stop kills the init (PID 1 of the sandbox's PID namespace), which makes
// the kernel kill every process in it, and then every process in the
// run's cgroup, which covers the same set a second way. The first
// caller's status wins. On cgroup v1 an init stopped before it attached
// itself is not in the cgroup yet: the SIGKILL to it is what ends it, and
// nothing else runs in its namespace before the program.
func (s *stopper) stop(status result.Status, limit, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.finished {
		return
	}
	s.stopped, s.status, s.limit, s.reason = true, status, limit, reason
	s.proc.Signal(syscall.SIGKILL)
	if s.cg != nil {
		s.cg.Kill() // best effort here; Destroy after the wait checks it
	}
}

// finish marks the init as reaped: no later stop may signal its pid.
func (s *stopper) finish() {
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
	s.once.Do(func() { close(s.done) })
}

func (s *stopper) result() (status result.Status, limit, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.limit, s.reason
}
