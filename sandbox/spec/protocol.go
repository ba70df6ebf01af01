package spec

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// Go is the one-byte message that releases the init once the supervisor
// has finished host-side setup.
var Go = []byte{'G'}

// Ready is sent by the init after its last setup step, right before
// execve. EOF without Ready means the init died during setup. With
// Spec.Trace it carries the steps' marks (EncodeReady).
var Ready = []byte{'R'}

// EncodeReady returns the Ready message: Ready alone, or followed by the
// JSON list of the init's step marks when there are some (Spec.Trace). A
// step error is a JSON object, so the two cannot be mistaken for each
// other.
func EncodeReady(steps []trace.Mark) []byte {
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
func DecodeReady(b []byte) (steps []trace.Mark, ok bool, err error) {
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

// Listener is the init's message that carries, as SCM_RIGHTS, the socket
// listening on ProxyAddr in the run's network namespace (Spec.Proxy). It
// comes before Ready; the init closes its own copy before the program
// starts.
var Listener = []byte{'L'}

// Exit is the first byte of the reaper's one message on its exit pipe
// (FDs.Status): the program's wait status, in decimal, written when the
// program has ended and right before the reaper exits. No message means
// the reaper was killed first (a stop, the OOM killer) or failed.
var Exit = []byte{'X'}

// EncodeExit returns the Exit message for wait status ws.
func EncodeExit(ws uint32) []byte {
	return strconv.AppendUint(append([]byte{}, Exit...), uint64(ws), 10)
}

// DecodeExit parses an Exit message.
func DecodeExit(b []byte) (uint32, error) {
	if len(b) < 2 || b[0] != Exit[0] {
		return 0, fmt.Errorf("decode exit status %q: not an exit message", truncate(b))
	}
	ws, err := strconv.ParseUint(string(b[1:]), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("decode exit status %q: %w", truncate(b), err)
	}
	return uint32(ws), nil
}

// MaxMessage bounds one sync-socket message; the spec of a run is a few KiB.
const MaxMessage = 1 << 20

// EncodeError returns the wire form of a failed init step: the result's
// own SandboxError, so the step and errno reach the caller as the init
// named them.
func EncodeError(e *result.SandboxError) []byte {
	b, err := json.Marshal(e)
	if err != nil { // a struct of strings and an int always marshals
		panic(fmt.Sprintf("bug: marshal SandboxError: %v", err))
	}
	return b
}

// DecodeError parses a step error sent by the init.
func DecodeError(b []byte) (*result.SandboxError, error) {
	var e result.SandboxError
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
