package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/sandbox/output"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
)

// A live sandbox: the second way to drive a prepared sandbox, for a
// runner started in session mode (plan.Runner.Mode pyrunner.ModeSession).
// Execute runs one program to its end; a live sandbox keeps its
// interpreter and runs cells in it, one at a time:
//
//	sb := supervisor.New(o)   // o.Plan.Runner.Mode = pyrunner.ModeSession
//	err := sb.Prepare()
//	err = sb.Start(ctx)      // the init released, the runner ready
//	c := sb.RunCell(ctx, id, 1, code, timeout) // as often as needed
//	sb.Interrupt()           // from any goroutine, during a cell
//	sb.Stop()                // or Kill: the program ends
//	out := sb.Finish()       // teardown, as after Execute
//
// The limits of the plan hold for the whole session (memory, pids, the
// CPU time of RLIMIT_CPU, the workspace); the wall clock holds per cell
// (RunCell's timeout) and does not run between cells; the output cap
// holds per cell, and past it the cell's stream is truncated, not the
// session killed.

// StopGrace is how long a cell past its timeout has, once interrupted
// (SIGINT, KeyboardInterrupt in the cell), to end before the session is
// killed; and how long Stop waits for the program to exit.
const StopGrace = 2 * time.Second

// cutWait bounds how long the end of a cell waits for its output to be
// drained: only a program still writing from a background thread or
// process makes it wait that long, and its output past the cut goes to
// the next cell.
const cutWait = 500 * time.Millisecond

// signalSettle is how long a cell waits after a SIGINT sent during the
// previous cell or between cells, so that the reaper has passed it on
// while the runner ignores it (between cells) rather than in the new
// cell.
const signalSettle = 50 * time.Millisecond

// Errors of RunCell that mean the cell was not run.
var (
	// ErrBusy: another cell of the session is running.
	ErrBusy = errors.New("a cell is already running in this session")
	// ErrEnded: the session's program is gone (stopped, killed, or it
	// ended itself); no cell can run.
	ErrEnded = errors.New("the session has ended")
)

// live is the state of a started session.
type live struct {
	cells  sync.Mutex // one cell at a time
	stop   *stopper
	stdout *output.Stream
	stderr *output.Stream
	// readers are the two output streams' and the report's goroutines.
	readers sync.WaitGroup
	// events carries the runner's report, closed at its end (every
	// process of the sandbox is gone); repErr is then why, if not EOF.
	events chan pyrunner.Event
	repErr error
	quit   chan struct{} // closed by Finish: the report reader stops sending

	mu         sync.Mutex
	ended      bool           // no cell can run any more
	lastSIGINT time.Time      // when the last SIGINT was sent
	endResult  *result.Result // the cell that ended the session, if one did
}

// Start releases the init of a sandbox prepared for a session-mode runner
// and returns once the runner is ready for its first cell. Every way the
// session can be stopped is armed first: ctx bounds only the start.
// After a failed Prepare it returns that failure.
func (sb *Sandbox) Start(ctx context.Context) error {
	if sb.err != nil {
		return sb.err
	}
	if sb.state != prepared {
		panic("bug: supervisor: Start without Prepare, or after Execute")
	}
	if sb.o.Plan.Runner.Mode != pyrunner.ModeSession {
		sb.Abort(result.StepError("start", fmt.Errorf("the plan's runner is in mode %q, not %q", sb.o.Plan.Runner.Mode, pyrunner.ModeSession)))
		return sb.err
	}
	sb.state = executed
	pl, tr, l := sb.o.Plan, sb.o.Trace, sb.l
	lv := &live{
		stop:   &stopper{proc: l.cmd.Process, done: make(chan struct{})},
		events: make(chan pyrunner.Event, 64),
		quit:   make(chan struct{}),
	}
	sb.live = lv

	// The output of each cell is capped on its own (output.Segment), and
	// a cell past the cap is truncated: no onLimit kills the session.
	lv.stdout = output.NewStream(pl.OutputLimit, nil, nil)
	lv.stderr = output.NewStream(pl.OutputLimit, nil, nil)
	lv.readers.Add(3)
	go func() { defer lv.readers.Done(); lv.stdout.CopyPipe(l.stdout) }()
	go func() { defer lv.readers.Done(); lv.stderr.CopyPipe(l.stderr) }()
	go func() { defer lv.readers.Done(); lv.readReport(sb.repR, pl.Runner.MaxOutputBytes) }()

	// Release the init as Execute does; the runner then answers ready
	// once its guard is armed (and preload imported), or exits.
	setupErr := sb.releaseInit()
	if setupErr != nil {
		lv.kill("", "", "")
		return sb.fail("setup", setupErr)
	}
	bound := time.NewTimer(pl.Timeout)
	defer bound.Stop()
	for {
		select {
		case ev, ok := <-lv.events:
			switch {
			case !ok:
				lv.setEnded(nil)
				return sb.fail("runner", fmt.Errorf("the Python runner exited before it was ready: %s", sb.stderrHead()))
			case isReady(ev):
				tr.Mark("runner ready")
				return nil
			}
		case <-bound.C:
			lv.kill("", "", "")
			return sb.fail("runner", fmt.Errorf("the Python runner was not ready within %s", pl.Timeout))
		case <-ctx.Done():
			lv.kill("", "", "")
			return sb.fail("runner", fmt.Errorf("stopped before the runner was ready: %v", context.Cause(ctx)))
		}
	}
}

func isReady(ev pyrunner.Event) bool {
	_, ok := ev.(pyrunner.Ready)
	return ok
}

// stderrHead is the start of what the program wrote on stderr so far,
// for an error message.
func (sb *Sandbox) stderrHead() string {
	seg := sb.live.stderr.Cut(cutWait)
	why, _ := result.EncodeText(head(seg.Kept, headSize))
	return why
}

// readReport passes the runner's report on as events until its end.
func (lv *live) readReport(r *os.File, maxOutput int64) {
	defer close(lv.events)
	defer r.Close()
	sr := pyrunner.NewSessionReader(r, maxOutput)
	for {
		ev, err := sr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				lv.repErr = err
			}
			io.Copy(io.Discard, r) // the writers never block on a dead reader
			return
		}
		select {
		case lv.events <- ev:
		case <-lv.quit:
			io.Copy(io.Discard, r)
			return
		}
	}
}

// Interrupt sends SIGINT to the sandbox's PID 1, which passes it on to
// the program: KeyboardInterrupt in a running cell (which then ends
// killed, interrupted by the caller); between cells the runner ignores
// it. It does nothing once the session has ended.
func (sb *Sandbox) Interrupt() {
	if sb.live != nil {
		sb.live.interrupt()
	}
}

func (lv *live) interrupt() {
	lv.mu.Lock()
	lv.lastSIGINT = time.Now()
	lv.mu.Unlock()
	lv.stop.signal(syscall.SIGINT)
}

// Kill ends the session now (SIGKILL to PID 1: every process of the
// sandbox); its result's status is killed, with reason. A running cell
// ends killed too.
func (sb *Sandbox) Kill(reason string) {
	if sb.live != nil {
		sb.live.kill(result.StatusKilled, "", reason)
	}
}

func (lv *live) kill(status result.Status, limit, reason string) {
	lv.setEnded(nil)
	lv.stop.stop(status, limit, reason)
}

// Stop ends the session the way it ends by itself: the runner's stdin is
// closed, and it exits 0 once the current cell, if any, is over. A
// program that does not exit within StopGrace (a thread that never ends)
// is killed. Stop returns once every process of the sandbox is gone.
func (sb *Sandbox) Stop() {
	lv := sb.live
	if lv == nil {
		return
	}
	lv.setEnded(nil)
	sb.l.stdin.Close()
	select {
	case <-sb.l.exited:
	case <-time.After(StopGrace):
		lv.stop.stop(result.StatusKilled, "", fmt.Sprintf("the program did not exit within %s of the end of its session", StopGrace))
	}
	sb.l.wait()
}

// Ended reports whether the session can run no more cells.
func (sb *Sandbox) Ended() bool {
	if sb.live == nil {
		return true
	}
	sb.live.mu.Lock()
	defer sb.live.mu.Unlock()
	return sb.live.ended
}

// setEnded marks the session over; r, when set, is the cell that ended
// it, whose status the session's result takes.
func (lv *live) setEnded(r *result.Result) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.ended = true
	if r != nil && lv.endResult == nil {
		lv.endResult = r
	}
}

// signal sends sig to the init unless it was reaped or stopped.
func (s *stopper) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped && !s.finished {
		s.proc.Signal(sig)
	}
}

// finishLive ends a session at Finish: the program is stopped if it still
// runs, every reader is done, and the session's result says how it ended
// and what it used in all.
func (sb *Sandbox) finishLive() {
	lv, l, r := sb.live, sb.l, sb.r
	sb.Stop()
	lv.stop.finish()
	close(lv.quit)
	waitReaders(&lv.readers, l)
	usage := sb.conf.usage(r)
	r.LimitsReached = sb.ws.reached()
	sb.recordNetwork(r, 0, true)

	ps := l.cmd.ProcessState
	var ws syscall.WaitStatus
	var exitErr error
	if ps != nil {
		ws, exitErr = l.programExit()
	}
	lv.mu.Lock()
	end := lv.endResult
	lv.mu.Unlock()
	switch status, limit, reason := lv.stop.result(); {
	case end != nil: // a cell ended the session: its status is the session's
		r.Status, r.Limit, r.Reason = end.Status, end.Limit, end.Reason
		r.ExitCode, r.Signal = end.ExitCode, end.Signal
	case status != "":
		r.Status, r.Limit, r.Reason = status, limit, reason
		if ps != nil && exitErr == nil {
			setExit(r, ws)
		}
	case ps == nil:
		sb.fail("wait", l.err)
	case exitErr != nil:
		sb.fail("reaper", exitErr)
	default:
		setExit(r, ws)
		classify(r, sb.o.Plan, usage, ps)
		if lv.repErr != nil {
			sb.fail("runner", lv.repErr)
		}
	}
}
