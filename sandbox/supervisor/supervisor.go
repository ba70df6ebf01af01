// Package supervisor is the host side of a run. It executes a plan
// (sandbox/plan) and never reads a policy: it opens the root, builds the
// run's confinement (run directory, workspace, seccomp filter, cgroup,
// detached mounts), starts the sandbox init in new namespaces, feeds it
// the spec and the program, captures output under caps, enforces the
// wall-clock timeout and manual stops, and turns whatever happened into
// a result.Result.
//
// A run has three calls, so that a sandbox can be prepared before its
// program is known:
//
//	sb := supervisor.New(o)      // the result skeleton; nothing on the host yet
//	err := sb.Prepare()         // host-side steps up to an init waiting for its spec
//	sb.Execute(ctx, code)       // the program runs, is stopped or fails
//	out := sb.Finish()          // teardown; the result and the stats
//
// (sb.Abort(err) instead of Execute: the program will not run; sb.Start
// instead for a session, whose cells RunCell runs one at a time: live.go.)
// Both Prepare and Execute are checklists: named steps in order, each
// with its why; the step names are the result's error steps and the
// trace's phases. What a step creates on the host is pushed on the sandbox's
// cleanup stack, which Finish unwinds.
//
// Killing a run kills its PID namespace's init (the program, PID 1
// inside): the kernel then kills every other process in the namespace,
// including ones that called setsid or double-forked, before the wait
// returns. The cleanup stack then kills whatever is still in the run's
// cgroup (nothing, normally) and removes it.
package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/nsbox/nsbox/sandbox/netproxy"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/roots"
	"github.com/nsbox/nsbox/sandbox/spec"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// Options describe one run.
type Options struct {
	ID        string     // run id (NewID)
	Plan      *plan.Plan // what to enforce; made by planner.Make
	Workspace string     // host directory for /workspace; "" for a fresh one, removed afterwards
	StateDir  string     // see StateDir()
	IDRange   IDRange    // host ids the run takes its own from; see IDRangeFromEnv
	// Exe is the binary started as the init; "" for initExe (nsbox-init
	// beside this binary, or /proc/self/exe).
	Exe string
	// Trace records each step's time (--trace-phases); nil for none.
	Trace *trace.Recorder
	// Stdout and Stderr, when set, receive the output live, up to the
	// cap (plain mode). The result then holds only the first KiB of that
	// stream (what Stats keeps), not all of it a second time; unset, the
	// result holds all of it, up to the cap.
	Stdout, Stderr io.Writer
	// Stdin is the program's standard input, then end of input; nil for
	// none (stdin at EOF). A run's only: a session's cells have none.
	// The supervisor writes it after the program's frame and does not
	// wait for it to be read: a program that leaves it unread is not
	// blocked, and its run not failed (pyrunner's protocol).
	Stdin []byte
}

// Stats are facts of a run that the audit log records beyond the result.
type Stats struct {
	StdoutBytes, StderrBytes int64  // everything the program wrote, kept or not
	StdoutHead, StderrHead   []byte // the first KiB of each captured stream
	RootManifestSHA256       string // the root's manifest, as checked before the run
}

// Outcome is what a run leaves: its result and its stats.
type Outcome struct {
	Result *result.Result
	Stats  Stats
	// OutputError is why the program's output could not be passed to
	// Options.Stdout or Stderr (plain mode): the caller closed the pipe,
	// a full disk. While the program ran it also stopped the run (status
	// killed); after it ended, it is the only trace of the lost output.
	OutputError error
}

// Sandbox is one run, from New to Finish. Its methods are called in that
// order, from one goroutine at a time; but for a session's Interrupt,
// Kill, Stop, Ended and Files, which may be called during a cell.
type Sandbox struct {
	o     Options
	r     *result.Result
	start int64 // trace.Now() at New: the result's duration starts here
	err   error // the first failure; Prepare and Execute do nothing after one

	clean cleanup
	root  *roots.Root
	ws    *workspace // /workspace and what bounds it
	conf  confinement
	ids   *runIDs         // the run's host uids and gids
	l     *launch         // the started init
	rep   *reportReader   // the runner's report pipe, read end
	proxy *netproxy.Proxy // network allowlist mode's proxy, from the init's release (network.go)
	repR  *os.File        // the same pipe, for a session (Start) instead
	live  *live           // a started session's state; nil for a run
	sp    *spec.Spec      // what the init gets
	stats Stats
	lost  error // the output that could not be passed on (Outcome.OutputError)
	state state

	// A warm run's early end (early.go): the program's /proc/PID/stat,
	// and the wait status read there when the run ended by it.
	prog    *os.File
	early   bool
	earlyWS syscall.WaitStatus
}

// state is how far a Sandbox got.
type state int

const (
	created  state = iota
	prepared       // the init waits for its spec
	warmed         // Warm ran: the runner waits for its program (warm.go)
	executed       // Execute or Abort ran
	finished
)

// New starts a run: the result skeleton, with the plan's limits (the
// cgroup ones once a cgroup exists). Nothing is created on the host.
func New(o Options) *Sandbox {
	if o.ID == "" {
		o.ID = NewID()
	}
	r := result.New(o.ID, o.Plan.Policy.Name)
	r.Limits = o.Plan.LimitsWithoutCgroup()
	if o.Workspace != "" { // bounded or not: the workspace step looks
		r.Limits.WorkspaceBytes, r.Limits.WorkspaceInodes = nil, nil
	}
	return &Sandbox{o: o, r: r, start: trace.Now()}
}

// fail records the first failure, as the step error it is.
func (sb *Sandbox) fail(step string, err error) error {
	if sb.err == nil {
		sb.err = result.StepError(step, err)
	}
	return sb.err
}

// Run is New, Prepare, Execute and Finish: one program, start to end.
func Run(ctx context.Context, o Options, code []byte) Outcome {
	sb := New(o)
	if sb.Prepare() == nil {
		sb.Execute(ctx, code)
	}
	return sb.Finish()
}

// Finish tears the run down (the cleanup stack: the init's descriptors,
// the cgroup, the run directory) and returns its outcome. A failure of
// the run, or of the teardown of a run that otherwise worked, makes the
// status sandbox_error. Finish may be called in any state, once.
func (sb *Sandbox) Finish() Outcome {
	sb.end()
	if err := sb.teardown(); err != nil && sb.err == nil {
		sb.fail("cleanup", err)
	}
	sb.o.Trace.Mark("cleanup")
	return sb.outcome()
}

// FinishLater is Finish for a caller that answers before the teardown:
// it returns the outcome as it stands once every process of the run is
// gone (Execute waited for that), and the teardown, for the caller to
// run afterwards, once. A teardown that fails then cannot change the
// outcome any more: its error is the caller's to report (a leftover on
// the host, named). Sessions (Start) use Finish.
func (sb *Sandbox) FinishLater() (Outcome, func() error) {
	if sb.live != nil {
		panic("bug: supervisor: FinishLater on a session")
	}
	sb.end()
	return sb.outcome(), sb.teardown
}

// end stops what still runs, before the teardown.
func (sb *Sandbox) end() {
	if sb.state == finished {
		panic("bug: supervisor: Finish called twice")
	}
	if (sb.state == prepared || sb.state == warmed) && sb.err == nil { // never executed: stop the init
		sb.Abort(errors.New("the run was finished before its program started"))
	}
	if sb.live != nil {
		sb.finishLive()
	}
	sb.state = finished
}

// teardown unwinds the cleanup stack. It marks no trace: FinishLater's
// caller runs it after the run's trace is done. After an early end
// (early.go) it first waits for the init, and checks that the reaper
// reports the status the run ended with.
func (sb *Sandbox) teardown() error {
	var first error
	if sb.prog != nil {
		if sb.early {
			first = sb.confirmEarly()
		}
		sb.prog.Close()
	}
	// The supervisor's hold on /workspace goes first: a fresh tmpfs is
	// freed before the cgroup its pages are charged to.
	if sb.ws != nil {
		sb.ws.close()
	}
	if err := sb.clean.run(); err != nil {
		return err
	}
	return first
}

// outcome is the run's result and stats as they stand.
func (sb *Sandbox) outcome() Outcome {
	r := sb.r
	if sb.err != nil {
		r.Status = result.StatusSandboxError
		r.Error = result.StepError("supervisor", sb.err)
		r.ExitCode, r.Signal = nil, nil
	}
	r.DurationMS = (trace.Now() - sb.start) / 1e6
	return Outcome{Result: r, Stats: sb.stats, OutputError: sb.lost}
}

// Files returns the API that reads and writes the sandbox's fresh
// workspace from the host, from Prepare to Finish: a program's input
// files before Execute, what it wrote after, or a live session's files.
// A caller's own directory has none (Options.Workspace).
func (sb *Sandbox) Files() (*Files, error) {
	switch {
	case sb.o.Workspace != "":
		return nil, fmt.Errorf("%w: /workspace is the caller's directory %s", ErrNoFiles, sb.o.Workspace)
	case sb.ws == nil:
		return nil, fmt.Errorf("%w: the sandbox is not prepared", ErrNoFiles)
	}
	return sb.ws.files, nil
}

// NewID returns a random run id (24 hex digits).
func NewID() string {
	b := make([]byte, 12)
	rand.Read(b) // never fails on Linux (getrandom)
	return hex.EncodeToString(b)
}

// isRoot reports whether this process runs as host root, which the run
// needs: rootless mode is not implemented.
func isRoot() bool { return os.Geteuid() == 0 }
