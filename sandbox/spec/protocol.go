package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Go is the one-byte message that releases the init once the supervisor
// has finished host-side setup.
var Go = []byte{'G'}

// Ready is sent by the init after its last setup step, right before
// execve. EOF without Ready means the init died during setup. With
// Spec.Trace it carries the step times (EncodeReady).
var Ready = []byte{'R'}

// Step is one timed setup step of the init: Name (the step's name in an
// InitError) and End, the CLOCK_MONOTONIC time in nanoseconds at which it
// finished. The clock is the host's: the sandbox has no time namespace, so
// the supervisor can place the steps among its own phases.
type Step struct {
	Name string `json:"name"`
	End  int64  `json:"end_ns"`
}

// EncodeReady returns the Ready message: Ready alone, or followed by the
// JSON steps when there are some. An InitError is a JSON object, so the
// two cannot be mistaken for each other.
func EncodeReady(steps []Step) []byte {
	if len(steps) == 0 {
		return Ready
	}
	b, err := json.Marshal(steps)
	if err != nil { // a slice of strings and ints always marshals
		panic(fmt.Sprintf("bug: marshal steps: %v", err))
	}
	return append(append([]byte{}, Ready...), b...)
}

// DecodeReady reports whether b is a Ready message and returns the steps
// it carries (none without Spec.Trace).
func DecodeReady(b []byte) (steps []Step, ok bool, err error) {
	if len(b) < len(Ready) || b[0] != Ready[0] {
		return nil, false, nil
	}
	if len(b) == len(Ready) {
		return nil, true, nil
	}
	if err := json.Unmarshal(b[len(Ready):], &steps); err != nil {
		return nil, true, fmt.Errorf("decode ready steps %q: %w", truncate(b), err)
	}
	return steps, true, nil
}

// MaxMessage bounds one sync-socket message; the spec of a run is a few KiB.
const MaxMessage = 1 << 20

// InitError is a setup failure inside the init, sent to the supervisor
// instead of a bare exit code so the result can name the step and errno.
type InitError struct {
	Step    string `json:"step"`            // e.g. "pivot_root", "bind /usr/lib/python3.11"
	Errno   int    `json:"errno,omitempty"` // 0 when not a syscall error
	Message string `json:"message"`
}

func (e *InitError) Error() string {
	return fmt.Sprintf("sandbox init: %s: %s", e.Step, e.Message)
}

// ErrnoName returns the symbolic errno ("EPERM"), or "" when there is none.
func (e *InitError) ErrnoName() string {
	if e.Errno == 0 {
		return ""
	}
	if n := unix.ErrnoName(syscall.Errno(e.Errno)); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", e.Errno)
}

// StepError builds an InitError for a failed step, keeping the errno of
// the underlying syscall error when there is one.
func StepError(step string, err error) *InitError {
	ie := &InitError{Step: step, Message: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		ie.Errno = int(errno)
	}
	return ie
}

// EncodeError returns the wire form of e.
func EncodeError(e *InitError) []byte {
	b, err := json.Marshal(e)
	if err != nil { // a struct of strings and an int always marshals
		panic(fmt.Sprintf("bug: marshal InitError: %v", err))
	}
	return b
}

// DecodeError parses an InitError sent by the init.
func DecodeError(b []byte) (*InitError, error) {
	var e InitError
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("decode init error %q: %w", truncate(b), err)
	}
	if e.Step == "" {
		return nil, fmt.Errorf("decode init error %q: no step", truncate(b))
	}
	return &e, nil
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
