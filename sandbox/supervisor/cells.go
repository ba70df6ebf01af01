package supervisor

import (
	"context"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/output"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// CellOutcome is what one cell of a session left.
type CellOutcome struct {
	// Result is the cell's, in the schema of a run's: its status, its
	// output (what the program wrote between the cell's start and its
	// end), its CPU time (the cgroup's, during the cell), the session's
	// peak memory so far, its violations, outputs and exception.
	Result *result.Result
	Stats  Stats
	// Ended: the session is over (a memory-limit kill, a cell that did
	// not stop when interrupted, the program's own exit); Finish is left.
	Ended bool
}

// RunCell runs code as cell n of a started session, with the wall-clock
// timeout given, and returns its outcome; id is the cell's result id.
// Cells run one at a time: a call while another runs, or after the
// session ended, returns ErrBusy or ErrEnded and runs nothing.
//
// A cell past its timeout is interrupted (SIGINT: KeyboardInterrupt in
// the cell); one that stops within StopGrace ends with status timeout
// and the session lives; one that does not is killed with the whole
// session, status timeout, and the reason says which. Cancelling ctx
// does the same with status killed.
func (sb *Sandbox) RunCell(ctx context.Context, id string, n int, code []byte, timeout time.Duration) (CellOutcome, error) {
	return sb.RunCellTo(ctx, id, n, code, timeout, nil, nil)
}

// RunCellTo is RunCell that also passes the cell's stdout and stderr to
// the writers as they are read (each up to the cap; a failing writer is
// dropped, the cell goes on): a cell streamed to its caller. The writers
// get nothing of the cell after RunCellTo returns.
func (sb *Sandbox) RunCellTo(ctx context.Context, id string, n int, code []byte, timeout time.Duration, stdout, stderr io.Writer) (CellOutcome, error) {
	lv := sb.live
	if lv == nil {
		panic("bug: supervisor: RunCell without Start")
	}
	if !lv.cells.TryLock() {
		return CellOutcome{}, ErrBusy
	}
	defer lv.cells.Unlock()
	lv.mu.Lock()
	ended, sinceSIGINT := lv.ended, time.Since(lv.lastSIGINT)
	lv.mu.Unlock()
	if ended {
		return CellOutcome{}, ErrEnded
	}
	if len(code) > pyrunner.MaxCellBytes {
		return CellOutcome{}, fmt.Errorf("cell %d: %d bytes, more than %d", n, len(code), pyrunner.MaxCellBytes)
	}
	// A SIGINT sent just before (a late interrupt of the previous cell,
	// or between cells) reaches the runner while it waits, not this cell.
	if sinceSIGINT < signalSettle {
		time.Sleep(signalSettle - sinceSIGINT)
	}
	// Events the program wrote on the report pipe between cells (it can:
	// doc.go, Limits) are not this cell's.
	for drained := false; !drained; {
		select {
		case _, ok := <-lv.events:
			if !ok {
				drained = true
			}
		default:
			drained = true
		}
	}

	r := result.New(id, sb.o.Plan.Policy.Name)
	r.Limits, r.Sandbox = sb.r.Limits, sb.r.Sandbox
	before := sb.cgroupStats()
	mark := sb.proxyMark()
	start := trace.Now()
	c := cellRun{n: n, timeout: timeout}
	if stdout != nil || stderr != nil {
		lv.stdout.SetTee(stdout)
		lv.stderr.SetTee(stderr)
	}
	c.wait(ctx, sb, pyrunner.EncodeCell(n, code))
	r.DurationMS = (trace.Now() - start) / 1e6

	// The cell is over: its output is what the streams hold up to now.
	// When the session ended with it, the streams end too (every writer
	// is gone with the PID namespace).
	if c.ended {
		// The report ends when its last writer is gone: normally the
		// whole sandbox. A program that closed it itself is still there,
		// and the session cannot go on without its report.
		select {
		case <-sb.l.exited:
		case <-time.After(StopGrace):
			lv.kill(result.StatusKilled, "", "the runner's report ended while its program still ran (the program closed it?), so the session was killed")
		}
		sb.l.wait()
		lv.stop.finish()
		waitReaders(&lv.readers, sb.l)
	}
	out, errs := lv.stdout.Cut(cutWait), lv.stderr.Cut(cutWait)
	lv.stdout.SetTee(nil)
	lv.stderr.SetTee(nil)
	setStreams(r, out, errs)
	after := sb.cgroupStats()
	if sb.conf.cg != nil {
		r.CPUMS = result.Int64((after.CPU - before.CPU).Milliseconds())
		r.PeakMemoryBytes = result.Int64(int64(after.PeakMemory))
	}
	r.LimitsReached = sb.ws.reached()
	sb.recordNetwork(r, mark, false)
	for _, v := range c.violations {
		r.Violations = append(r.Violations, result.Violation{Kind: v.Kind, Name: v.Name, Line: v.Line, Col: v.Col, Detail: v.Detail})
	}
	if c.ended {
		sb.classifyEnd(r, after)
		lv.setEnded(r)
	} else {
		c.classify(r)
	}
	st := Stats{
		StdoutBytes: out.Total, StderrBytes: errs.Total,
		StdoutHead: head(out.Kept, headSize), StderrHead: head(errs.Kept, headSize),
		RootManifestSHA256: sb.stats.RootManifestSHA256,
	}
	return CellOutcome{Result: r, Stats: st, Ended: c.ended}, nil
}

// cellRun follows one cell from its frame to its end.
type cellRun struct {
	n       int
	timeout time.Duration

	cell        *pyrunner.Cell // the runner's end of the cell; nil if none came
	static      *pyrunner.Static
	violations  []pyrunner.Violation
	ended       bool // the report ended: the session is over
	timedOut    bool // the timeout fired and the cell was interrupted
	cancelled   error
	interrupted bool // the caller interrupted the cell (Interrupt)
}

// wait sends the frame and follows the report until the cell's end,
// interrupting it at its timeout and killing the session when it does
// not stop within StopGrace.
func (c *cellRun) wait(ctx context.Context, sb *Sandbox, frame []byte) {
	lv := sb.live
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	var grace <-chan time.Time
	escalate := func() {
		lv.interrupt()
		grace = time.After(StopGrace)
	}
	sigintBefore := lv.sigintCount()
	// The frame is written from here while the deadline runs: a runner
	// that does not read it (stuck in a thread, the pipe full) is caught
	// by the same timeout. The write ends with the session at worst.
	go writeFrame(sb.l.stdin, frame)
	done := ctx.Done()
	for {
		select {
		case ev, ok := <-lv.events:
			if !ok {
				c.ended = true
				c.interrupted = lv.sigintCount() != sigintBefore
				return
			}
			switch e := ev.(type) {
			case pyrunner.Static:
				c.static = &e
			case pyrunner.Violation:
				c.violations = append(c.violations, e)
			case pyrunner.Cell:
				if e.N == c.n {
					c.cell = &e
					c.interrupted = lv.sigintCount() != sigintBefore
					return
				}
			}
		case <-deadline.C:
			c.timedOut = true
			escalate()
		case <-done:
			c.cancelled, done = context.Cause(ctx), nil
			if grace == nil {
				escalate()
			}
		case <-grace:
			grace = nil
			if c.cancelled != nil && !c.timedOut {
				lv.kill(result.StatusKilled, "", fmt.Sprintf("%v; the cell did not stop within %s of its interrupt (SIGINT), so the session was killed", c.cancelled, StopGrace))
			} else {
				lv.kill(result.StatusTimeout, result.LimitWallTime, fmt.Sprintf("cell wall clock %s: the cell did not stop within %s of its interrupt (SIGINT), so the session was killed", c.timeout, StopGrace))
			}
		}
	}
}

// sigintCount is the time of the last SIGINT, as a token that changes
// with each one.
func (lv *live) sigintCount() time.Time {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	return lv.lastSIGINT
}

// writeFrame writes a cell's frame to the runner's stdin. EPIPE and a
// closed pipe (the session ended) are not errors here: the report says
// how the session ended.
func writeFrame(w interface{ Write([]byte) (int, error) }, frame []byte) {
	w.Write(frame)
}

// classify sets the status of a cell that ended with the session alive,
// from the runner's word and what the supervisor did. The supervisor's
// own verdicts (its timeout, the caller's cancel) outrank the runner's.
func (c *cellRun) classify(r *result.Result) {
	e := c.cell
	zero, one := 0, 1
	switch e.Status {
	case pyrunner.CellOK:
		r.Status, r.ExitCode = result.StatusOK, &zero
		if e.ExitCode != nil {
			r.ExitCode = e.ExitCode
		}
	case pyrunner.CellError:
		r.Status, r.ExitCode = result.StatusError, &one
		if e.ExitCode != nil {
			r.ExitCode = e.ExitCode
		}
		if e.ExitCode == nil && slices.ContainsFunc(c.violations, func(v pyrunner.Violation) bool { return v.Runtime }) {
			r.Status = result.StatusPolicyViolation
			r.Reason = fmt.Sprintf("the cell failed after %d refused action(s)", len(r.Violations))
		}
	case pyrunner.CellInterrupted:
		sig := int(syscall.SIGINT)
		r.Status, r.Signal = result.StatusError, &sig
		if c.interrupted {
			r.Status, r.Reason = result.StatusKilled, "interrupted (SIGINT) by the caller; the session lives"
		}
	case pyrunner.CellPolicyViolation:
		r.Status = result.StatusPolicyViolation
		r.Reason = fmt.Sprintf("%d violation(s) of the policy's Python allowlist; nothing of the cell ran", len(r.Violations))
	case pyrunner.CellSyntaxError:
		r.Status, r.ExitCode = result.StatusError, &one
		if c.static != nil {
			r.Reason = fmt.Sprintf("syntax error at line %d: %s", c.static.Line, c.static.Detail)
		}
	}
	r.Outputs, r.OutputsTruncated, r.Exception = e.Outputs, e.OutputsTruncated, e.Exception
	switch {
	case c.timedOut && e.Status != pyrunner.CellOK:
		r.Status, r.Limit = result.StatusTimeout, result.LimitWallTime
		r.Reason = fmt.Sprintf("cell wall clock %s: the cell was interrupted (SIGINT) and stopped; the session lives", c.timeout)
	case c.cancelled != nil && e.Status != pyrunner.CellOK:
		r.Status, r.Limit = result.StatusKilled, ""
		r.Reason = fmt.Sprintf("%v; the cell was interrupted (SIGINT) and stopped; the session lives", c.cancelled)
	}
}

// classifyEnd sets the status of a cell during which the session ended:
// the supervisor's kill first (timeout, Kill), then what the exit and the
// cgroup say (memory_limit, RLIMIT_CPU, the program's own end).
func (sb *Sandbox) classifyEnd(r *result.Result, usage cgroup.Stats) {
	l := sb.l
	if status, limit, reason := sb.live.stop.result(); status != "" {
		r.Status, r.Limit, r.Reason = status, limit, reason
		return
	}
	ps := l.cmd.ProcessState
	if ps == nil {
		r.Status, r.Reason = result.StatusError, "the session's program ended during the cell"
		return
	}
	ws, err := l.programExit()
	if err != nil {
		r.Status, r.Reason = result.StatusError, fmt.Sprintf("the session's program ended during the cell: %v", err)
		return
	}
	setExit(r, ws)
	classify(r, sb.o.Plan, usage, ps)
	if r.Reason == "" {
		r.Reason = "the session's program ended during the cell"
	}
	r.Reason += "; the session is over"
}

// setStreams puts a cell's output segments into its result.
func setStreams(r *result.Result, out, errs output.Segment) {
	result.SetStdout(r, out.Kept)
	result.SetStderr(r, errs.Kept)
	r.StdoutTruncated, r.StderrTruncated = out.Truncated, errs.Truncated
}

// cgroupStats reads the cgroup's counters; the zero Stats without one.
func (sb *Sandbox) cgroupStats() cgroup.Stats {
	if sb.conf.cg == nil {
		return cgroup.Stats{}
	}
	st, _ := sb.conf.cg.Stats()
	return st
}
