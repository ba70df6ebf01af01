package result

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// SandboxError is the one step error of a run, host side and init side
// alike: which step failed, with the errno, so callers can act on it. The
// init sends it to the supervisor as this same JSON, the supervisor's
// steps return it, and the result carries it.
type SandboxError struct {
	Step    string `json:"step"`            // e.g. "pivot_root", "bind /workspace", "execve /usr/bin/python3.11", "rootfs"
	Errno   string `json:"errno,omitempty"` // symbolic, e.g. "EPERM"; empty if not a syscall error
	Message string `json:"message"`

	err error // the cause, for errors.Is and errors.As; not sent
}

// StepError describes err as the failure of step. Errno is filled in when
// err wraps a syscall.Errno. An err that already is a *SandboxError names
// its own step and is returned as it is: the innermost step is the one
// that failed.
func StepError(step string, err error) *SandboxError {
	var se *SandboxError
	if errors.As(err, &se) {
		return se
	}
	e := &SandboxError{Step: step, Message: err.Error(), err: err}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		e.Errno = ErrnoName(errno)
	}
	return e
}

// Error returns "step: message".
func (e *SandboxError) Error() string {
	return fmt.Sprintf("%s: %s", e.Step, e.Message)
}

// Unwrap returns the cause; nil for an error decoded from the init.
func (e *SandboxError) Unwrap() error { return e.err }

// ErrnoName returns the symbolic name of e, such as "EPERM", or "errno N"
// for one the kernel headers do not name.
func ErrnoName(e syscall.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", uintptr(e))
}
