package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// A warm sandbox: a run-mode sandbox started ahead of its program, for a
// pool that hands it to the next run:
//
//	sb := supervisor.New(o)  // o.Plan.Runner.Mode = pyrunner.ModeRun
//	err := sb.Prepare()
//	err = sb.Warm()          // the init released, the runner's preload
//	                         // imported: it waits for the program's frame on stdin
//	sb.Alive()               // while it waits: still there?
//	sb.Execute(ctx, code)    // the run starts here: its clock, its duration
//	out := sb.Finish()       // or Finish alone: never used, torn down
//
// Between Warm and Execute nothing of the program exists: the runner has
// done only its own work (the venv's site, its config, the preload), as
// a cold run does before reading the program. The wall clock, the caller's
// context and the output caps are armed by Execute, when the program is
// sent, so the time spent waiting never counts against the run. The
// cgroup's counters and RLIMIT_CPU do count the runner's start-up and
// preload, as in a cold run.

// Warm releases the init of a prepared run-mode sandbox and returns once
// the runner has written its ready line: its own start-up and the
// policy's preload are done, and it waits for its program. A runner that
// is not ready within the plan's timeout is a failure, as one that exits.
// After a failed Prepare it returns that failure; a failed release leaves
// the sandbox stopped, for Finish.
func (sb *Sandbox) Warm() error {
	if sb.err != nil {
		return sb.err
	}
	if sb.state != prepared {
		panic("bug: supervisor: Warm without Prepare, or after Execute")
	}
	if m := sb.o.Plan.Runner.Mode; m != pyrunner.ModeRun {
		sb.Abort(result.StepError("warm", fmt.Errorf("the plan's runner is in mode %q, not %q", m, pyrunner.ModeRun)))
		return sb.err
	}
	sb.state = warmed
	if err := sb.releaseInit(); err != nil {
		sb.Abort(result.StepError("setup", err))
		return sb.err
	}
	if err := sb.waitReady(); err != nil {
		sb.Abort(result.StepError("runner", err))
		return sb.err
	}
	sb.o.Trace.Mark("runner ready")
	// The program's process, for an early end (early.go).
	sb.prog = openProgramStat(sb.l.cmd.Process.Pid)
	return nil
}

// waitReady waits for the runner's ready line, the first line of its
// report (pyrunner's protocol), bounded by the plan's timeout.
func (sb *Sandbox) waitReady() error {
	bound := time.NewTimer(sb.o.Plan.Timeout)
	defer bound.Stop()
	select {
	case <-sb.rep.buf.seen:
	case <-bound.C:
		return fmt.Errorf("the Python runner was not ready within %s", sb.o.Plan.Timeout)
	}
	line := sb.rep.buf.line
	if line == nil {
		return errors.New("the Python runner exited before it was ready")
	}
	if rep, err := pyrunner.ParseReport(bytes.NewReader(line)); err != nil || !rep.Ready {
		return fmt.Errorf("the Python runner's first report line is not its ready line: %.120q", line)
	}
	return nil
}

// releaseInit sends the init its spec and Go, and waits until it has
// built the sandbox and exec'd the interpreter (or failed); in network
// allowlist mode it then serves the proxy endpoint the init made. The
// program's first connection waits in the listener's backlog until then.
func (sb *Sandbox) releaseInit() error {
	tr := sb.o.Trace
	err := sb.l.release(sb.sp, func(steps []trace.Mark) {
		tr.Add("init: ", steps)
		tr.Mark("ready")
	})
	tr.Mark("exec")
	if err != nil {
		return err
	}
	if err := sb.startProxy(); err != nil {
		return result.StepError("proxy", err)
	}
	if sb.proxy != nil {
		tr.Mark("proxy")
	}
	return nil
}

// Alive reports whether a warm sandbox still waits: its init has not
// exited (the runner failed, or something killed it).
func (sb *Sandbox) Alive() bool {
	if sb.state != warmed || sb.err != nil {
		return false
	}
	select {
	case <-sb.l.exited:
		return false
	default:
		return true
	}
}

// SetStdin sets a warm sandbox's program input (Options.Stdin): the
// run that takes the sandbox brings it.
func (sb *Sandbox) SetStdin(stdin []byte) error {
	if sb.state != warmed {
		return ErrNotWarm
	}
	sb.o.Stdin = stdin
	return nil
}

// ErrNotWarm is SetOutput's and SetStdin's refusal outside a warm sandbox.
var ErrNotWarm = errors.New("the sandbox is not warm")

// SetOutput sets where a warm sandbox's program output goes live
// (Options.Stdout and Stderr): the run that takes the sandbox decides,
// not the pool that started it.
func (sb *Sandbox) SetOutput(stdout, stderr io.Writer) error {
	if sb.state != warmed {
		return ErrNotWarm
	}
	sb.o.Stdout, sb.o.Stderr = stdout, stderr
	return nil
}
