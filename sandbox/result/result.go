// Package result defines the structured result of one sandboxed run, the
// object `nsbox run --json` prints, and the exit code `nsbox run` returns.
//
// The JSON form is documented in docs/result-schema.md and specified by
// docs/result.schema.json; a test keeps both in step with this package. The
// Schema field is bumped on any incompatible change; new fields may be added
// without a bump.
package result

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// SchemaVersion is the version of the JSON result object this package writes.
const SchemaVersion = 1

// Status is the outcome of a run.
type Status string

// The statuses a run can end with. docs/result-schema.md explains each one.
const (
	StatusOK              Status = "ok"               // the program exited 0
	StatusError           Status = "error"            // non-zero exit, a signal not sent by nsbox, or a Python syntax error
	StatusTimeout         Status = "timeout"          // wall clock or RLIMIT_CPU reached; every process of the run was killed
	StatusMemoryLimit     Status = "memory_limit"     // the cgroup's OOM killer ended a process; every process of the run was killed
	StatusOutputLimit     Status = "output_limit"     // stdout or stderr passed its cap; the run was killed
	StatusPolicyViolation Status = "policy_violation" // the Python policy layer refused the program (static check) or something it did
	StatusKilled          Status = "killed"           // stopped by hand (a signal to nsbox), or the caller went away
	StatusSandboxError    Status = "sandbox_error"    // nsbox could not build the sandbox or start the program
)

// Statuses returns every Status, in documentation order.
func Statuses() []Status {
	return []Status{
		StatusOK, StatusError, StatusTimeout, StatusMemoryLimit,
		StatusOutputLimit, StatusPolicyViolation, StatusKilled, StatusSandboxError,
	}
}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses() {
		if s == v {
			return true
		}
	}
	return false
}

// Exit codes of `nsbox run` for runs that did not end with the program's own
// exit. They follow timeout(1) and env(1) where those have one.
const (
	ExitTimeout         = 124 // as timeout(1)
	ExitSandboxError    = 125 // as timeout(1) and docker run: the tool itself failed
	ExitPolicyViolation = 126 // as env(1): the command could not be run
	ExitKilled          = 137 // 128+SIGKILL: the run was killed
)

// Result is the structured result of one run.
type Result struct {
	Schema          int           `json:"schema"`
	ID              string        `json:"id"`
	Status          Status        `json:"status"`
	Reason          string        `json:"reason,omitempty"`        // short human detail, e.g. "wall clock 2s"
	Limit           string        `json:"limit,omitempty"`         // the limit that ended the run, one of LimitNames; only with timeout, memory_limit, output_limit
	ExitCode        *int          `json:"exit_code"`               // the program's exit code; nil if it did not exit normally
	Signal          *int          `json:"signal"`                  // the signal that ended the program; nil if it exited
	Stdout          string        `json:"stdout"`                  // captured bytes as UTF-8, invalid sequences replaced by U+FFFD
	StdoutBase64    string        `json:"stdout_base64,omitempty"` // exact captured bytes, only when not valid UTF-8
	Stderr          string        `json:"stderr"`
	StderrBase64    string        `json:"stderr_base64,omitempty"`
	StdoutTruncated bool          `json:"stdout_truncated"`
	StderrTruncated bool          `json:"stderr_truncated"`
	DurationMS      int64         `json:"duration_ms"`
	CPUMS           *int64        `json:"cpu_ms"`            // CPU time of all the run's processes, from the cgroup; nil without a cgroup or if the program never started
	PeakMemoryBytes *int64        `json:"peak_memory_bytes"` // peak memory of the run's cgroup; nil likewise
	Policy          string        `json:"policy"`
	Limits          *Limits       `json:"limits"`            // effective limits; nil only if the run was refused before a policy was resolved
	LimitsReached   []string      `json:"limits_reached"`    // limits the program ran into without the run being ended, from ReachedNames; [] when none
	Sandbox         *Sandbox      `json:"sandbox"`           // protections that were active; nil if no sandbox was started
	Violations      []Violation   `json:"violations"`        // what the Python policy layer refused or recorded; [] when nothing
	Phases          []Phase       `json:"phases,omitempty"`  // where the time went, with --trace-phases only
	Files           []File        `json:"files,omitzero"`    // the workspace's regular files after the run, when the caller asked; [] when none
	Network         *Network      `json:"network,omitempty"` // the connections through the proxy, in network allowlist mode only
	Error           *SandboxError `json:"error,omitempty"`   // only with StatusSandboxError

	// Display outputs, when the runner was asked for them: a final
	// expression's value, figures, tables. Never stored in the audit log.
	Outputs          []Output   `json:"outputs,omitempty"`
	OutputsTruncated bool       `json:"outputs_truncated,omitempty"` // outputs past the cap were dropped
	Exception        *Exception `json:"exception,omitempty"`         // the uncaught exception that ended a session cell

	// The captured bytes given to SetStdout and SetStderr, nil when none:
	// what WriteJSON writes as stdout and stderr.
	stdout, stderr []byte
}

// Violation is one thing the Python policy layer refused (an import, a
// builtin, an audit event) or, for the static check, found in the code.
type Violation struct {
	Kind   string `json:"kind"`   // ViolationImport, ViolationBuiltin, ViolationEvent, ViolationAttribute or ViolationNetwork
	Name   string `json:"name"`   // the module, builtin, event or attribute, e.g. "os", "eval", "subprocess.Popen", "__globals__"
	Line   int    `json:"line"`   // 1-based line in the program; 0 when unknown
	Col    int    `json:"col"`    // 0-based column as Python's ast reports it; 0 when unknown
	Detail string `json:"detail"` // human text: what was refused and why
}

// Output is one display output of a run or a session cell, as a notebook
// shows it: a MIME type and its data (text, or base64 for binary types).
type Output struct {
	Type string `json:"type"` // OutputText, OutputHTML or OutputPNG
	Data string `json:"data"` // the text; standard padded base64 for OutputPNG
}

// The types of Output.Type.
const (
	OutputText = "text/plain"
	OutputHTML = "text/html"
	OutputPNG  = "image/png"
)

// Exception is the uncaught exception that ended a session cell, as the
// Python runner saw it. It is the program's word, not nsbox's: a program
// can forge it (docs/python-layer.md).
type Exception struct {
	Name      string `json:"name"`      // the exception's class name, e.g. "ZeroDivisionError"
	Value     string `json:"value"`     // str() of the exception
	Traceback string `json:"traceback"` // as printed on stderr, without the runner's frames
}

// File is one regular file of a fresh workspace after the run.
type File struct {
	Path string `json:"path"` // relative to /workspace
	Size int64  `json:"size"` // bytes
}

// Phase is one step of a run and its wall-clock time (--trace-phases).
type Phase struct {
	Name string  `json:"name"` // e.g. "rootfs", "start init", "init setup", "program"
	MS   float64 `json:"ms"`   // milliseconds, to the microsecond
}

// Violation kinds.
const (
	ViolationImport    = "import"
	ViolationBuiltin   = "builtin"
	ViolationEvent     = "event"
	ViolationAttribute = "attribute"
	ViolationNetwork   = "network"   // a connection or a name lookup that network allowlist mode refused
	ViolationConstruct = "construct" // python.mode "restricted": a construct the restricted compiler refuses (match, async, a metaclass)
)

// New returns a Result for run id under the named policy, with Schema set.
func New(id, policy string) *Result {
	return &Result{Schema: SchemaVersion, ID: id, Policy: policy}
}

// EncodeText turns captured bytes into the JSON text form. Valid UTF-8 is
// returned as text with an empty b64. Otherwise text has every invalid
// sequence replaced by U+FFFD and b64 holds the exact bytes in standard
// base64, so no byte is lost.
func EncodeText(b []byte) (text, b64 string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), base64.StdEncoding.EncodeToString(b)
}

// SetStdout records b, the captured stdout, in r. r keeps b itself, not a
// copy, and the caller must not change b afterwards: a program's output
// may be as large as its cap, and the supervisor holding it must not need
// a multiple of that. WriteJSON writes the bytes given here, encoding
// them as it goes (the forms of EncodeText).
//
// When b is valid UTF-8, r.Stdout is its text (sharing b's memory) and
// r.StdoutBase64 is empty, as EncodeText gives. Otherwise both fields stay
// empty: the text with U+FFFD and the base64 would be copies of up to
// twice b's size; StdoutBytes returns b.
func SetStdout(r *Result, b []byte) { r.stdout, r.Stdout, r.StdoutBase64 = setStream(b) }

// SetStderr is SetStdout for stderr.
func SetStderr(r *Result, b []byte) { r.stderr, r.Stderr, r.StderrBase64 = setStream(b) }

// setStream is SetStdout's work: the bytes r keeps and the text fields.
func setStream(b []byte) (raw []byte, text, b64 string) {
	if len(b) == 0 {
		return nil, "", ""
	}
	if utf8.Valid(b) {
		return b, unsafe.String(&b[0], len(b)), ""
	}
	return b, "", ""
}

// StdoutBytes returns the captured stdout: the bytes SetStdout recorded,
// or, in a Result decoded from JSON, the bytes its fields encode.
func (r *Result) StdoutBytes() []byte { return streamBytes(r.stdout, r.Stdout, r.StdoutBase64) }

// StderrBytes is StdoutBytes for stderr.
func (r *Result) StderrBytes() []byte { return streamBytes(r.stderr, r.Stderr, r.StderrBase64) }

func streamBytes(raw []byte, text, b64 string) []byte {
	if raw != nil {
		return raw
	}
	if b64 != "" {
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return b
		}
	}
	return []byte(text)
}

// ProcessExitCode returns the exit code of `nsbox run` for r:
//
//	ok, error                          the program's exit code, or 128+signal if a signal ended it
//	timeout                            124
//	policy_violation                   126
//	killed, output_limit, memory_limit 137
//	sandbox_error, unknown status      125
//
// An ok or error result with neither exit code nor signal gives 0 or 1.
func (r *Result) ProcessExitCode() int {
	switch r.Status {
	case StatusOK, StatusError:
		switch {
		case r.ExitCode != nil:
			return inRange(*r.ExitCode)
		case r.Signal != nil:
			return inRange(128 + *r.Signal)
		case r.Status == StatusOK:
			return 0
		default:
			return 1
		}
	case StatusTimeout:
		return ExitTimeout
	case StatusPolicyViolation:
		return ExitPolicyViolation
	case StatusKilled, StatusOutputLimit, StatusMemoryLimit:
		return ExitKilled
	default:
		return ExitSandboxError
	}
}

// inRange keeps an exit status in 0..255: a value outside would be
// truncated by the kernel (256 reads as 0, a success), so it is reported as
// nsbox's own failure instead.
func inRange(code int) int {
	if code < 0 || code > 255 {
		return ExitSandboxError
	}
	return code
}

// WriteJSON writes r as exactly one JSON object followed by "\n", without
// HTML escaping. A zero Schema is written as SchemaVersion and nil lists
// (Violations, LimitsReached, Sandbox.Namespaces) as [], so the output
// always matches the schema; r itself is not modified.
//
// The output recorded with SetStdout and SetStderr is encoded straight
// from those bytes into a writeBufSize buffer in front of w, never into a
// copy of the whole object: an object up to that size is written in one
// Write, a larger one in several (see writeStreams).
func (r *Result) WriteJSON(w io.Writer) error {
	out := *r
	if out.Schema == 0 {
		out.Schema = SchemaVersion
	}
	if out.Violations == nil {
		out.Violations = []Violation{}
	}
	if out.LimitsReached == nil {
		out.LimitsReached = []string{}
	}
	if out.Sandbox != nil && out.Sandbox.Namespaces == nil {
		sb := *out.Sandbox
		sb.Namespaces = []string{}
		out.Sandbox = &sb
	}
	// The recorded streams are left out of the encoded skeleton and
	// written in its place by writeStreams.
	var streams []stream
	if r.stdout != nil {
		out.Stdout, out.StdoutBase64 = "", ""
		streams = append(streams, stream{"stdout", r.stdout})
	}
	if r.stderr != nil {
		out.Stderr, out.StderrBase64 = "", ""
		streams = append(streams, stream{"stderr", r.stderr})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&out); err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	bw := bufio.NewWriterSize(w, writeBufSize)
	if err := writeStreams(bw, buf.Bytes(), streams); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}
