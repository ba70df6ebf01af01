// Package session is a long-lived sandbox: one interpreter, in one
// sandbox, running cells one at a time, as a notebook's kernel does.
// Variables, functions, imports and open files persist from one cell to
// the next; so does everything the sandbox bounds (memory, processes, the
// CPU time of RLIMIT_CPU, /workspace), across the whole session.
//
//	s, err := session.Open(ctx, o)      // a sandbox whose runner waits for cells
//	r, err := s.Run(ctx, code, timeout) // one cell; again and again
//	s.Interrupt()                       // KeyboardInterrupt in the running cell
//	f, err := s.Files()                 // /workspace, from the host
//	final := s.Close()                  // teardown: nothing left
//
// Each cell's result has the schema of a run's (sandbox/result): its own
// id, status, output, CPU time, violations, and the display outputs and
// exception the runner reported. Each cell is one audit row, labelled
// session=<id> and cell=<n>. What a cell reports of itself (its status,
// outputs, exception) is the program's word; the statuses the
// supervisor decides (timeout, memory_limit, killed) outrank it.
//
// The wall clock holds per cell and does not run between cells; a
// session with no cell for its idle timeout is closed. A cell past its
// timeout is interrupted and, when it does not stop within
// supervisor.StopGrace, the session is killed (supervisor.RunCell).
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// The labels every cell's audit row gets besides the session's own.
const (
	LabelSession = "session" // the session's id
	LabelCell    = "cell"    // the cell's number, from 1
)

// Errors of Run for a cell that did not run. The service maps ErrBusy to
// 409, ErrClosed to 404 or 410, ErrTooLarge to 413, ErrTimeout to 400.
var (
	ErrBusy     = supervisor.ErrBusy
	ErrClosed   = errors.New("the session is closed")
	ErrTooLarge = errors.New("cell too large")
	ErrTimeout  = errors.New("bad cell timeout")
)

// Options describe a session.
type Options struct {
	// Plan is what to enforce, made by the caller (planner.Make) with
	// Runner.Mode = pyrunner.ModeSession, and Runner.Outputs set for
	// display outputs. Its Timeout is the longest a cell may be given;
	// its OutputLimit caps each stream of each cell.
	Plan     *plan.Plan
	StateDir string             // supervisor.StateDir()
	IDRange  supervisor.IDRange // zero: from the environment
	Exe      string             // the init's binary; "" for the supervisor's default
	// AuditDB is the audit log (audit.Path's rule: "" for the default).
	// Rows are written by sandbox/job's BeginRecord and FinishRecord, as
	// a run's are, with job.Version.
	AuditDB string
	// Labels go into every cell's row, with session= and cell=.
	Labels map[string]string
	// IdleTimeout closes a session that ran no cell for this long; 0
	// for none (the caller then closes it).
	IdleTimeout time.Duration
}

// Session is one live sandbox. Its methods may be called from any
// goroutine; cells run one at a time.
type Session struct {
	id      string
	o       Options
	sb      *supervisor.Sandbox
	db      *audit.DB
	created time.Time
	files   *supervisor.Files

	mu       sync.Mutex
	cells    int           // cells started
	running  bool          // a cell runs
	cellDone chan struct{} // closed when the running cell returns
	closed   bool          // Close began: no new cell
	idle     *time.Timer
	idled    bool // the idle timeout closed it
	claimed  bool // a pool's session was handed to a caller (claim.go)

	closeOnce sync.Once
	done      chan struct{} // closed once the sandbox is torn down
	final     *result.Result
}

// Open starts a session: the sandbox built, its interpreter started and
// ready for the first cell. On failure nothing is left on the host.
func Open(ctx context.Context, o Options) (*Session, error) {
	if err := check(o); err != nil {
		return nil, err
	}
	db, err := audit.Open(audit.Path(o.AuditDB))
	if err != nil {
		return nil, fmt.Errorf("session: audit log: %w", err)
	}
	id := supervisor.NewID()
	sb := supervisor.New(supervisor.Options{ID: id, Plan: o.Plan, StateDir: o.StateDir, IDRange: o.IDRange, Exe: o.Exe})
	err = sb.Prepare()
	if err == nil {
		err = sb.Start(ctx)
	}
	if err != nil {
		out := sb.Finish()
		db.Close()
		if out.Result.Error != nil {
			return nil, fmt.Errorf("session: %w", out.Result.Error)
		}
		return nil, fmt.Errorf("session: %w", err)
	}
	files, _ := sb.Files() // a session's workspace is always a fresh one
	s := &Session{id: id, o: o, sb: sb, db: db, created: time.Now(), files: files, done: make(chan struct{})}
	if o.IdleTimeout > 0 {
		s.idle = time.AfterFunc(o.IdleTimeout, s.idleExpired)
	}
	return s, nil
}

// check refuses options a session cannot run with.
func check(o Options) error {
	switch {
	case o.Plan == nil:
		return errors.New("session: no plan")
	case o.Plan.Runner.Mode != pyrunner.ModeSession:
		return fmt.Errorf("session: the plan's runner is in mode %q, not %q", o.Plan.Runner.Mode, pyrunner.ModeSession)
	case len(o.Labels)+2 > audit.MaxLabels:
		return fmt.Errorf("session: %d labels: at most %d besides %s and %s", len(o.Labels), audit.MaxLabels-2, LabelSession, LabelCell)
	case o.IdleTimeout < 0:
		return fmt.Errorf("session: idle timeout %s: must not be negative", o.IdleTimeout)
	}
	for _, k := range []string{LabelSession, LabelCell} {
		if _, ok := o.Labels[k]; ok {
			return fmt.Errorf("session: label %q is the session's own", k)
		}
	}
	return nil
}

// ID is the session's id (that of its sandbox: its run directory and
// cgroup are named after it).
func (s *Session) ID() string { return s.id }

// Info describes a session at one moment.
type Info struct {
	ID      string    `json:"id"`
	Policy  string    `json:"policy"`
	Created time.Time `json:"created"`
	Cells   int       `json:"cells"`   // cells started so far
	Running bool      `json:"running"` // a cell runs now
	Ended   bool      `json:"ended"`   // no cell can run any more
}

// Info returns what the session is now.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{ID: s.id, Policy: s.o.Plan.Policy.Name, Created: s.created, Cells: s.cells,
		Running: s.running, Ended: s.closed || s.sb.Ended()}
}

// Done is closed once the session is torn down (Close, the idle timeout,
// or a cell that ended it), for a caller that keeps a table of sessions.
func (s *Session) Done() <-chan struct{} { return s.done }

// Run runs code as the session's next cell, for at most timeout (0: the
// plan's timeout, which no cell may exceed), and returns its result. A
// cell that cannot run returns an error and no result: ErrBusy while
// another cell runs, ErrClosed once the session is closed or over,
// ErrTooLarge past the plan's program size, ErrTimeout for a timeout
// beyond the plan's. A cell that could not be recorded in the audit log
// does not run: its result is a sandbox_error.
func (s *Session) Run(ctx context.Context, code []byte, timeout time.Duration) (*result.Result, error) {
	return s.RunTo(ctx, code, timeout, nil, nil)
}

// RunTo is Run that also passes the cell's stdout and stderr to the
// writers as the program writes them (supervisor.RunCellTo).
func (s *Session) RunTo(ctx context.Context, code []byte, timeout time.Duration, stdout, stderr io.Writer) (*result.Result, error) {
	pl := s.o.Plan
	switch {
	case timeout == 0:
		timeout = pl.Timeout
	case timeout < 0 || timeout > pl.Timeout:
		return nil, fmt.Errorf("%w: %s: the policy allows at most %s per cell", ErrTimeout, timeout, pl.Timeout)
	}
	if int64(len(code)) > pl.ProgramSize || len(code) > pyrunner.MaxCellBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the policy's %d (limits.program_size)", ErrTooLarge, len(code), pl.ProgramSize)
	}
	s.mu.Lock()
	switch {
	case s.closed || s.sb.Ended():
		s.mu.Unlock()
		return nil, ErrClosed
	case s.running:
		s.mu.Unlock()
		return nil, ErrBusy
	}
	s.running, s.cellDone = true, make(chan struct{})
	s.cells++
	n := s.cells
	if s.idle != nil {
		s.idle.Stop()
	}
	s.mu.Unlock()

	r, ended := s.run(ctx, n, code, timeout, stdout, stderr)

	s.mu.Lock()
	s.running = false
	close(s.cellDone)
	if s.idle != nil && !s.closed && !ended {
		s.idle.Reset(s.o.IdleTimeout)
	}
	s.mu.Unlock()
	if ended { // torn down before its last cell returns: nothing of it is kept
		s.Close()
	}
	if r == nil {
		return nil, ErrClosed
	}
	return r, nil
}

// run runs cell n between its two audit writes; it returns nil when the
// session ended before the cell could start.
func (s *Session) run(ctx context.Context, n int, code []byte, timeout time.Duration, stdout, stderr io.Writer) (r *result.Result, ended bool) {
	id := supervisor.NewID()
	labels := maps.Clone(s.o.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelSession], labels[LabelCell] = s.id, fmt.Sprint(n)
	rec, err := job.BeginRecord(s.db, id, s.o.Plan.Policy, code, nil, labels)
	if err != nil {
		r := result.New(id, s.o.Plan.Policy.Name)
		r.Status, r.Error = result.StatusSandboxError, result.StepError("audit", err)
		return r, false
	}
	c, err := s.sb.RunCellTo(ctx, id, n, code, timeout, stdout, stderr)
	if err != nil { // the session ended meanwhile (ErrBusy cannot happen: s.running)
		r := result.New(id, s.o.Plan.Policy.Name)
		r.Status, r.Error = result.StatusSandboxError, result.StepError("session", err)
		job.FinishRecord(s.db, rec, r, supervisor.Stats{})
		return nil, true
	}
	if err := job.FinishRecord(s.db, rec, c.Result, c.Stats); err != nil {
		// The cell happened and its result stands; its row stays
		// unfinished, and a later audit command finishes it as killed.
		c.Result.Reason = joinReason(c.Result.Reason, fmt.Sprintf("not recorded in the audit log: %v", err))
	}
	return c.Result, c.Ended
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Interrupt sends KeyboardInterrupt to the running cell, which ends
// killed (interrupted by the caller) if it stops; the session lives. It
// reports whether a cell was running; between cells it does nothing.
func (s *Session) Interrupt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running || s.closed {
		return false
	}
	s.sb.Interrupt()
	return true
}

// Files is the session's /workspace, read and written from the host
// (supervisor.Files), between cells or during one.
func (s *Session) Files() (*supervisor.Files, error) {
	if s.files == nil {
		return nil, supervisor.ErrNoFiles
	}
	return s.files, nil
}

// idleExpired closes a session that ran no cell for its idle timeout.
func (s *Session) idleExpired() {
	s.mu.Lock()
	if s.running || s.closed {
		s.mu.Unlock()
		return
	}
	s.idled = true
	s.mu.Unlock()
	s.Close()
}

// Close ends the session and tears its sandbox down; nothing of it is
// left on the host. A running cell is killed with it. It returns the
// session's own result: how its program ended, and the CPU time and peak
// memory of the whole session. Calling it again returns the same result.
func (s *Session) Close() *result.Result {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		if s.idle != nil {
			s.idle.Stop()
		}
		running, cellDone, idled := s.running, s.cellDone, s.idled
		s.mu.Unlock()
		if running {
			s.sb.Kill("the session was closed during the cell")
			<-cellDone
		}
		s.sb.Stop()
		out := s.sb.Finish()
		s.final = out.Result
		if idled && s.final.Status == result.StatusOK {
			s.final.Reason = fmt.Sprintf("closed after %s without a cell (idle timeout)", s.o.IdleTimeout)
		}
		s.db.Close()
		close(s.done)
	})
	<-s.done
	return s.final
}
