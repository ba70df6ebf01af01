package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/output"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// headSize is how much of each stream Stats keeps.
const headSize = 1024

// Execute runs code in the prepared sandbox and records how the run
// ended. It is a checklist like Prepare, from arming the stops to
// classifying the exit; Finish then tears the sandbox down. Cancelling
// ctx stops the run with status killed; context.Cause(ctx) becomes the
// reason. After a failed Prepare it does nothing.
func (sb *Sandbox) Execute(ctx context.Context, code []byte) {
	if sb.err != nil {
		return
	}
	if sb.state != prepared && sb.state != warmed {
		panic("bug: supervisor: Execute without Prepare, or twice")
	}
	// A warm sandbox's init was released and its runner waits for the
	// program: the run, its clock and its duration start now (warm.go).
	warm := sb.state == warmed
	if warm {
		sb.start = trace.Now()
	}
	sb.state = executed
	pl, tr, l, r := sb.o.Plan, sb.o.Trace, sb.l, sb.r

	// Every way a run can be stopped is armed before the program can
	// start: the wall clock, the caller (ctx), the output caps. The first
	// to fire names the status; killing the init tears down the whole PID
	// namespace (stopper.stop), and the cleanup stack then removes the
	// cgroup.
	stop := &stopper{proc: l.cmd.Process, done: make(chan struct{})}
	timer := time.AfterFunc(pl.Timeout, func() {
		stop.stop(result.StatusTimeout, result.LimitWallTime, pl.Reasons.Wall)
	})
	defer timer.Stop()
	go func() {
		select {
		case <-ctx.Done():
			stop.stop(result.StatusKilled, "", fmt.Sprint(context.Cause(ctx)))
		case <-stop.done:
		}
	}()
	stdout := output.NewStream(pl.OutputLimit, sb.o.Stdout, func() {
		stop.stop(result.StatusOutputLimit, result.LimitStdout, fmt.Sprintf("stdout exceeded %d bytes", pl.OutputLimit))
	})
	stderr := output.NewStream(pl.OutputLimit, sb.o.Stderr, func() {
		stop.stop(result.StatusOutputLimit, result.LimitStderr, fmt.Sprintf("stderr exceeded %d bytes", pl.OutputLimit))
	})
	// In truncate mode a stream past the cap keeps its head and its tail
	// and the program goes on: onLimit is never called.
	if pl.OutputTruncate {
		stdout.KeepHeadAndTail("stdout")
		stderr.KeepHeadAndTail("stderr")
	}
	// Output passed on as it arrives (plain mode) is not kept beyond the
	// head the audit log records: the caller has it, and a second copy
	// of up to the cap would be the supervisor's memory, outside any
	// cgroup. In --json mode the result needs it all, kept once.
	if sb.o.Stdout != nil {
		stdout.KeepOnly(headSize)
	}
	if sb.o.Stderr != nil {
		stderr.KeepOnly(headSize)
	}
	// A caller that can no longer take the output it asked for (it
	// closed its end of the pipe, the disk behind it is full) has gone
	// away: the run is stopped, not left to fill a dead stream.
	for name, st := range map[string]*output.Stream{"stdout": stdout, "stderr": stderr} {
		st.OnTeeError(func(err error) {
			stop.stop(result.StatusKilled, "", callerGone(name, err))
		})
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); stdout.Copy(l.stdout) }()
	go func() { defer readers.Done(); stderr.Copy(l.stderr) }()

	// Release the init: the spec, then Go. It builds the sandbox (its own
	// checklist, sandbox/initproc) and answers Ready with its steps'
	// times, or the step that failed; EOF after Ready means the program
	// was exec'd. A sandbox that failed half-built is killed: it has no
	// status of its own.
	var setupErr error
	if !warm {
		setupErr = sb.releaseInit()
	}
	if setupErr == nil {
		go feedProgram(l.stdin, code, sb.o.Stdin)
	} else {
		stop.stop("", "", "")
	}

	// The program runs until it exits or is stopped. Every process of the
	// run is gone once its init is reaped (the PID namespace died with
	// it), so the streams end and what the cgroup counted is final.
	// A warm run may end as soon as its program is exiting (early.go);
	// otherwise when its init is reaped.
	var waitErr error
	if warm && sb.prog != nil && setupErr == nil {
		sb.earlyWS, sb.early = sb.waitEarly(&readers)
	}
	if !sb.early {
		waitErr = l.wait()
	}
	tr.Mark("program")
	stop.finish()
	timer.Stop()
	waitReaders(&readers, l)
	rep, repErr := sb.rep.finish()
	// Every process of the run is gone: the proxy's connections end with
	// it, and what they did goes into the result.
	sb.recordNetwork(r, 0, true)
	// The readers are done: the kept bytes go into the result as they
	// are, not copied (result.SetStdout).
	result.SetStdout(r, stdout.Kept())
	result.SetStderr(r, stderr.Kept())
	r.StdoutTruncated, r.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	sb.stats.StdoutBytes, sb.stats.StderrBytes = stdout.Total(), stderr.Total()
	sb.stats.StdoutHead = head(stdout.Kept(), headSize)
	sb.stats.StderrHead = head(stderr.Kept(), headSize)
	if err := stdout.TeeError(); err != nil {
		sb.lost = fmt.Errorf("%s", callerGone("stdout", err))
	} else if err := stderr.TeeError(); err != nil {
		sb.lost = fmt.Errorf("%s", callerGone("stderr", err))
	}
	usage := sb.conf.usage(r)
	// Whether the program filled /workspace: its call failed with ENOSPC
	// and the status stays what its exit says, so the result names the
	// limit apart. The workspace stays until Finish, for the caller to
	// read what the program left (Files).
	r.LimitsReached = sb.ws.reached()
	tr.Mark("collect")

	// How it ended. A stop (timeout, output cap, by hand) outranks what
	// it caused; then a failed setup; then the exit, the cgroup's
	// counters and the runner's report decide.
	// The program's own end comes from the reaper; the init's process
	// state (the reaper's) counts the CPU time of the whole namespace.
	// After an early end the init is still exiting: the status is the
	// one the kernel showed (the teardown checks the reaper's).
	ps := l.cmd.ProcessState
	ended := ps != nil || sb.early
	var ws syscall.WaitStatus
	var exitErr error
	switch {
	case sb.early:
		ws = sb.earlyWS
	case ps != nil:
		ws, exitErr = l.programExit()
	}
	if status, limit, reason := stop.result(); status != "" {
		r.Status, r.Limit, r.Reason = status, limit, reason
		if ended && exitErr == nil {
			setExit(r, ws)
		}
		recordViolations(r, rep)
		return
	}
	switch {
	case setupErr != nil:
		sb.fail("setup", setupErr)
	case !ended:
		sb.fail("wait", waitErr)
	case exitErr != nil:
		sb.fail("reaper", exitErr)
	default:
		setExit(r, ws)
		classify(r, pl, usage, ps)
		if repErr != nil {
			sb.fail("runner", repErr)
		} else if err := runnerFailed(r, rep); err != nil {
			sb.fail("runner", err)
		} else {
			applyReport(r, rep)
			refusedEnds(r)
		}
	}
}

// Abort stops a prepared sandbox whose program will not run (the caller
// could not record the run, say); err, usually a *result.SandboxError
// naming the caller's step, becomes the result's error. After a failed
// Prepare it does nothing.
func (sb *Sandbox) Abort(err error) {
	if (sb.state != prepared && sb.state != warmed) || sb.err != nil {
		return
	}
	sb.state = executed
	sb.fail("abort", err)
	(&stopper{proc: sb.l.cmd.Process, done: make(chan struct{})}).stop("", "", "")
	sb.l.wait()
	if sb.rep != nil { // a session's report pipe is closed by the cleanup stack
		sb.rep.finish()
	}
}

// callerGone is the reason of a run stopped because nsbox could not write
// the program's output to its own stream name.
func callerGone(name string, err error) string {
	if errors.Is(err, syscall.EPIPE) {
		return fmt.Sprintf("the caller closed nsbox's %s (the program's output had nowhere to go)", name)
	}
	return fmt.Sprintf("nsbox's %s could not be written (%v)", name, err)
}

// head returns a copy of at most the first n bytes of b.
func head(b []byte, n int) []byte {
	return append([]byte(nil), b[:min(n, len(b))]...)
}

// feedProgram writes the program's frame to the interpreter's stdin, then
// the program's own input, and closes it (pyrunner's protocol). It is not
// waited for: a program that leaves its input unread ends its run all the
// same, and the write then fails with EPIPE (SIGPIPE is not raised for a
// descriptor other than Go's stdout and stderr), which is not an error
// here; nor is one that failed before the program began, which its run's
// result reports.
func feedProgram(w *os.File, code, stdin []byte) {
	defer w.Close()
	if _, err := w.Write(pyrunner.EncodeProgram(code)); err != nil {
		return
	}
	if len(stdin) > 0 {
		w.Write(stdin)
	}
}

// drainBound is how long waitReaders lets the readers drain what the
// program left in its pipes, at the pace their destination takes it.
const drainBound = 10 * time.Second

// waitReaders waits for both output streams to reach EOF. Every writer is
// gone once the PID namespace is torn down, so this is quick. A reader
// that is still behind is left to drain its pipe: while bytes wait there
// it is writing them on (in plain mode to nsbox's caller, who may be
// slow), and closing the pipe would lose them, and with them an output
// limit they pass (the status would say ok). Every half second with
// nothing left in either pipe, and at drainBound in any case, the read
// ends are closed: a guard against a writer that survived.
func waitReaders(readers *sync.WaitGroup, l *launch) {
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	deadline := time.Now().Add(drainBound)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if time.Now().Before(deadline) && (unread(l.stdout) > 0 || unread(l.stderr) > 0) {
			continue
		}
		l.stdout.Close()
		l.stderr.Close()
		<-done
		return
	}
}

// unread is the number of bytes waiting in pipe f (FIONREAD), 0 when it
// cannot be read. Through SyscallConn: Fd would switch f to blocking mode,
// and a Close would then no longer stop a Read in progress.
func unread(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	})
	return n
}
