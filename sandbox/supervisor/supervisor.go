// Package supervisor is the host side of a run: it resolves the root,
// starts the sandbox init in new namespaces, feeds it the spec and the
// program, captures output under caps, enforces the wall-clock timeout and
// manual stops, and turns whatever happened into a result.Result.
//
// Killing a run kills its PID namespace's init (the program, PID 1 inside):
// the kernel then kills every other process in the namespace, including
// ones that called setsid or double-forked, before the wait returns.
package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/output"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/roots"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Options describe one run.
type Options struct {
	Policy    *policies.Policy // validated, already narrowed by flags
	Code      []byte           // the program's source
	Workspace string           // host dir for /workspace; "" for a fresh one
	StateDir  string           // see StateDir()
	Exe       string           // the binary to start as init; "" for initExe (nsbox-init beside this one, or /proc/self/exe)
	Version   string           // nsbox version, recorded in a root built on first use
	CheckOnly bool             // run only the runner's static check (nsbox check); the program never runs
	Filename  string           // the program's name in tracebacks and messages; "" for ProgramName
	Trace     bool             // record the time of each phase in the result (--trace-phases)
	// Gate, when set, is called once the init has started and before it
	// may set up and run the program; an error stops the run (a
	// sandbox_error of step GateStep) before the program starts. nsbox run
	// waits there for the run's audit row, written meanwhile.
	Gate     func() error
	GateStep string
	Stats    *Stats    // when set, filled with what the audit log records beyond the result
	ID       string    // run id; "" for a new one (NewID)
	Log      io.Writer // notes such as "building the base root"; nil for none
	// Stdout and Stderr, when set, receive the kept output live (plain
	// mode). The result holds it either way.
	Stdout, Stderr io.Writer
}

// Stats are facts of a run that the result does not carry.
type Stats struct {
	StdoutBytes, StderrBytes int64  // everything the program wrote, kept or not
	StdoutHead, StderrHead   []byte // the first KiB of each captured stream
	RootManifestSHA256       string // the root's manifest, as checked before the run
}

// headSize is how much of each stream Stats keeps.
const headSize = 1024

// Run runs one program and always returns a result. Cancelling ctx stops
// the run with status killed; context.Cause(ctx) becomes the reason.
func Run(ctx context.Context, o Options) *result.Result {
	id := o.ID
	if id == "" {
		id = NewID()
	}
	r := result.New(id, o.Policy.Name)
	// The limits are known from the policy; the cgroup ones are added once
	// a cgroup enforces them. sandbox stays null until one exists.
	r.Limits = limitsOf(o.Policy, false)
	start := time.Now()
	defer func() { r.DurationMS = time.Since(start).Milliseconds() }()
	ph := &phases{on: o.Trace, last: start}
	defer func() { r.Phases = ph.list }()
	ctx = withPhases(ctx, ph)
	err := run(ctx, o, r)
	ph.mark("cleanup") // run's deferred steps: cgroup destroy, run dir removal
	if err != nil {
		r.Status = result.StatusSandboxError
		r.Error = sandboxError(err)
		r.ExitCode, r.Signal = nil, nil
	}
	return r
}

// stepError carries the failing host-side step into the result.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func sandboxError(err error) *result.SandboxError {
	var ie *spec.InitError
	if errors.As(err, &ie) {
		return &result.SandboxError{Step: ie.Step, Errno: ie.ErrnoName(), Message: ie.Message}
	}
	var se *stepError
	if errors.As(err, &se) {
		return result.NewSandboxError(se.step, se.err)
	}
	return result.NewSandboxError("supervisor", err)
}

func run(ctx context.Context, o Options, r *result.Result) (err error) {
	if os.Geteuid() != 0 {
		return &stepError{"privileges", errors.New("nsbox run needs root (rootless mode is not implemented yet)")}
	}
	ph := phasesOf(ctx)
	if err := requirements(o.Policy); err != nil {
		return err
	}
	ph.mark("requirements")
	exe := o.Exe
	if exe == "" {
		exe = initExe()
	}
	root, err := roots.Open(ctx, o.Policy.Python.Root, roots.Options{Verify: o.Policy.Python.Verify, Version: o.Version, Log: o.Log})
	if err != nil {
		return &stepError{"rootfs", err}
	}
	if o.Stats != nil {
		o.Stats.RootManifestSHA256 = root.Header.ManifestSHA256
	}
	ph.mark("rootfs")
	rd, err := newRunDir(o.StateDir, r.ID)
	if err != nil {
		return &stepError{"state dir", err}
	}
	defer func() {
		if rerr := rd.remove(); rerr != nil && err == nil {
			err = &stepError{"cleanup", rerr}
		}
	}()
	ws := o.Workspace
	if ws == "" {
		ws, err = rd.freshWorkspace()
	} else {
		err = checkWorkspace(ws)
	}
	if err != nil {
		return &stepError{"workspace", err}
	}
	ph.mark("state dir and workspace")
	conf, err := confine(o.Policy, r.ID, o.StateDir)
	if err != nil {
		return err
	}
	ph.mark("cgroup and profiles")
	defer func() {
		if derr := conf.destroy(); derr != nil && err == nil {
			err = &stepError{"cleanup", derr}
		}
	}()
	limits, active := conf.report(o.Policy)
	r.Limits = limits
	bindFiles, binds, err := openBinds(root.Dir, ws)
	if err != nil {
		return &stepError{"rootfs", err}
	}
	defer func() { closeAll(bindFiles) }() // nil once handed to the init
	// The runner's report pipe: the write end goes to the init after the
	// bind fds, the read end is drained here.
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return &stepError{"report pipe", err}
	}
	defer reportW.Close()
	defer func() {
		if reportR != nil { // not yet handed to readReport
			reportR.Close()
		}
	}()
	reportFD := syncFD + 1 + len(bindFiles)
	argv, err := runnerArgv(root, runnerConfig(o.Policy, o.CheckOnly, reportFD, o.Filename))
	if err != nil {
		return &stepError{"runner", err}
	}
	sp := newSpec(o.Policy, r.ID, argv, binds)
	sp.ReportFD = reportFD
	sp.Rlimits = rlimits(o.Policy.Limits)
	sp.Landlock = conf.landlockABI > 0
	sp.Trace = o.Trace // the init's steps become "init: ..." phases
	// On cgroup v1 the init attaches itself to the run's cgroup through
	// tasks files opened here, as host root; they follow the report pipe.
	tasksFiles, tasks, err := cgroupTasks(conf.cg, reportFD+1)
	if err != nil {
		return err
	}
	defer func() { closeAll(tasksFiles) }() // nil once handed to the init
	sp.CgroupTasks = tasks
	ph.mark("binds and spec")
	// The seccomp filter is compiled before the init starts: the spec is
	// then complete and goes out the moment the init runs, and a profile
	// that fails to compile leaves no process behind.
	if sp.Seccomp, err = conf.compile(); err != nil {
		return err
	}
	ph.mark("seccomp compile")

	// PDEATHSIG fires when the thread that forked the init exits, not the
	// process: keep this goroutine on its thread until the init is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l, err := start(exe, slices.Concat(bindFiles, []*os.File{reportW}, tasksFiles), conf.cg)
	if err != nil {
		return &stepError{"start init", err}
	}
	// Fork, uid/gid maps and the init's execve (Start waits for it).
	ph.mark("start init")
	closeAll(tasksFiles) // the init has its copies
	tasksFiles = nil
	reportW.Close() // the init has its copy; EOF once the sandbox is gone
	report := readReport(reportR)
	reportR = nil
	r.Sandbox = active
	defer l.closeHostEnds()
	closeAll(bindFiles) // the init has its copies
	bindFiles = nil

	stop := &stopper{proc: l.cmd.Process, cg: conf.cg, done: make(chan struct{})}
	timer := time.AfterFunc(o.Policy.Limits.Timeout.Duration, func() {
		stop.stop(result.StatusTimeout, result.LimitWallTime, "wall clock "+o.Policy.Limits.Timeout.Duration.String())
	})
	defer timer.Stop()
	go func() {
		select {
		case <-ctx.Done():
			stop.stop(result.StatusKilled, "", fmt.Sprint(context.Cause(ctx)))
		case <-stop.done:
		}
	}()
	limit := int64(o.Policy.Limits.OutputLimit)
	stdout := output.NewStream(limit, o.Stdout, func() {
		stop.stop(result.StatusOutputLimit, result.LimitStdout, fmt.Sprintf("stdout exceeded %d bytes", limit))
	})
	stderr := output.NewStream(limit, o.Stderr, func() {
		stop.stop(result.StatusOutputLimit, result.LimitStderr, fmt.Sprintf("stderr exceeded %d bytes", limit))
	})
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); stdout.Copy(l.stdout) }()
	go func() { defer readers.Done(); stderr.Copy(l.stderr) }()

	// No host-side setup is left: the fork code wrote the uid/gid maps,
	// and the init enters its cgroup itself (v2: cloned into it; v1: its
	// locked thread attaches through the tasks files right after reading
	// the spec). So the spec and Go go out at once, after the caller's
	// gate. The init's steps run from its execve to Ready; the last phase,
	// Ready's way here.
	var setupErr error
	if o.Gate != nil {
		if err := o.Gate(); err != nil {
			setupErr = &stepError{o.GateStep, err}
		}
		ph.mark("gate")
	}
	if setupErr == nil {
		setupErr = l.release(sp, func(steps []spec.Step) {
			ph.markInit(steps)
			ph.mark("init setup")
		})
	}
	ph.mark("exec")
	if setupErr == nil {
		go feedCode(l.stdin, o.Code)
	} else {
		stop.stop("", "", "") // kill a half-built sandbox; no status of its own
	}

	waitErr := l.cmd.Wait()
	ph.mark("program")
	stop.finish()
	timer.Stop()
	waitReaders(&readers, l)
	rep, repErr := report.finish()
	result.SetStdout(r, stdout.Bytes())
	result.SetStderr(r, stderr.Bytes())
	r.StdoutTruncated, r.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	if o.Stats != nil {
		o.Stats.StdoutBytes, o.Stats.StderrBytes = stdout.Total(), stderr.Total()
		o.Stats.StdoutHead = head(stdout.Bytes(), headSize)
		o.Stats.StderrHead = head(stderr.Bytes(), headSize)
	}

	// Every process of the run is gone (the PID namespace died with its
	// init); what the cgroup counted is final.
	usage := conf.usage(r)
	ph.mark("teardown and stats")

	if status, limit, reason := stop.result(); status != "" {
		// A stop (timeout, output cap, by hand) outranks what it caused.
		r.Status, r.Limit, r.Reason = status, limit, reason
		setExit(r, l.cmd.ProcessState)
		recordViolations(r, rep)
		return nil
	}
	if setupErr != nil {
		return setupErr
	}
	if l.cmd.ProcessState == nil {
		return &stepError{"wait", waitErr}
	}
	setExit(r, l.cmd.ProcessState)
	classify(r, o.Policy, usage, l.cmd.ProcessState)
	if repErr != nil {
		return &stepError{"runner", repErr}
	}
	if err := runnerFailed(r, rep); err != nil {
		return err
	}
	applyReport(r, rep)
	return nil
}

// head returns a copy of at most the first n bytes of b.
func head(b []byte, n int) []byte {
	return append([]byte(nil), b[:min(n, len(b))]...)
}

// feedCode writes the program to the interpreter's stdin and closes it.
// EPIPE (the program ended without reading it all) is not an error here.
func feedCode(w *os.File, code []byte) {
	w.Write(code)
	w.Close()
}

// waitReaders waits for both output streams to reach EOF. Every writer is
// gone once the PID namespace is torn down, so this is quick; the bound is
// a guard so a run always ends within its timeout plus a second.
func waitReaders(readers *sync.WaitGroup, l *launch) {
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
		l.stdout.Close()
		l.stderr.Close()
		<-done
	}
}

// setExit fills exit_code or signal from the wait status.
func setExit(r *result.Result, ps *os.ProcessState) {
	if ps == nil {
		return
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
	case ws.Exited():
		c := ws.ExitStatus()
		r.ExitCode = &c
	case ws.Signaled():
		s := int(ws.Signal())
		r.Signal = &s
	}
}

// stopper kills the run once, remembering the first reason.
type stopper struct {
	mu       sync.Mutex
	proc     *os.Process
	cg       *cgroup.Cgroup // nil without a cgroup
	status   result.Status
	limit    string
	reason   string
	stopped  bool
	finished bool
	done     chan struct{} // closed by finish
	once     sync.Once
}

// stop kills the init (PID 1 of the sandbox's PID namespace), which makes
// the kernel kill every process in it, and then every process in the
// run's cgroup, which covers the same set a second way. The first
// caller's status wins. On cgroup v1 an init stopped before it attached
// itself is not in the cgroup yet: the SIGKILL to it is what ends it, and
// nothing else runs in its namespace before the program.
func (s *stopper) stop(status result.Status, limit, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.finished {
		return
	}
	s.stopped, s.status, s.limit, s.reason = true, status, limit, reason
	s.proc.Signal(syscall.SIGKILL)
	if s.cg != nil {
		s.cg.Kill() // best effort here; Destroy after the wait checks it
	}
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

// NewID returns a random run id (24 hex digits).
func NewID() string {
	b := make([]byte, 12)
	rand.Read(b) // never fails on Linux (getrandom)
	return hex.EncodeToString(b)
}
