package supervisor

import (
	"os"
	"sync"
	"syscall"

	"github.com/nsbox/nsbox/sandbox/result"
)

// stopper kills the run once, remembering the first reason.
type stopper struct {
	mu       sync.Mutex
	proc     *os.Process
	status   result.Status
	limit    string
	reason   string
	stopped  bool
	finished bool
	done     chan struct{} // closed by finish
	once     sync.Once
}

// stop SIGKILLs the init, PID 1 of the sandbox's PID namespace: the
// kernel then kills every other process in the namespace at once (those
// that called setsid or double-forked too), and the init's wait returns
// only when all of them are gone. That is the whole kill; the first
// caller's status wins.
//
// The run's cgroup is not touched here. It holds no process outside the
// namespace (nothing inside may join another PID namespace), so killing
// it could only slow the kill down: on cgroup v1 that means freezing it,
// and a freeze that catches a SIGKILLed process before it has run its
// exit keeps it frozen, while the freezer's retry loop takes the CPU that
// the dying processes, and every other run stopped at the same time, need
// to die. The cleanup stack kills and removes the cgroup after the wait,
// off the deadline's path (cgroup.Destroy), when it is normally empty.
// On cgroup v1 an init stopped before it attached itself is not in the
// cgroup yet: the SIGKILL to it is what ends it, and nothing else runs in
// its namespace before the program.
func (s *stopper) stop(status result.Status, limit, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if s.finished {
		// An output cap a reader finds passed while it drains what the
		// program left in its pipe: the program ended first, but its
		// output was cut all the same. Recorded, so that the status does
		// not depend on which of the two the scheduler ran first; there
		// is nothing left to signal.
		if status == result.StatusOutputLimit {
			s.stopped, s.status, s.limit, s.reason = true, status, limit, reason
		}
		return
	}
	s.stopped, s.status, s.limit, s.reason = true, status, limit, reason
	s.proc.Signal(syscall.SIGKILL)
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
