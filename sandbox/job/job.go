// Package job is one run of a program, whichever door it came in by: the
// command line (nsbox run) and the service (nsbox serve) both build a
// Request and call Run, so a run has one set of steps around the
// supervisor, one audit row per attempt and one result.
//
// Run's steps, in order: resolve the policy; check the caller's input
// (labels, limits, files); make the plan (the policy narrowed by the
// caller's flags, checked against the host: fail closed); take the
// program, bounded by the plan, and its standard input, bounded by
// MaxStdin; build the base root on first use; begin the audit row, in the
// background while the supervisor prepares the sandbox; place the
// caller's files in the fresh workspace; wait for the row; run the
// program; list the workspace's files; finish the row. A run refused
// before a sandbox existed still has a result (status sandbox_error) and
// a finished row.
//
// The package also holds what every door shares with the run: label
// rules (ParseLabels, CheckLabels), the audit row helpers (BeginRow,
// RecordRefused) and the base root's first-use build (EnsureBase).
package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// Version is nsbox's version, recorded in every audit row and in the base
// root's header. The command sets it once at start-up.
var Version = "dev"

// Request is one run as a door asks for it.
type Request struct {
	// Policy is the resolved policy; when nil, PolicyName is resolved
	// (policies.Resolve: a built-in name or a file's path). PolicyName
	// also names the policy of a run refused before it was resolved.
	Policy     *policies.Policy
	PolicyName string
	// Flags narrow the policy (planner.Make refuses raising it).
	Flags planner.Flags
	// InputError is the door's own failure to read the request (a flag
	// that does not parse): the run is refused with it, as bad input,
	// once the policy is known, and recorded.
	InputError error
	// Code is the program. ReadCode, when set, is called instead once
	// the plan is made, with the plan's limits (limits.program_size and
	// the timeout, for a program read from a stream); either way a
	// program larger than the plan accepts is refused, not cut.
	Code     []byte
	ReadCode func(size int64, wait time.Duration) ([]byte, error)
	// Stdin is the program's standard input, then end of input; nil for
	// none (the program finds stdin at EOF). ReadStdin, when set, is
	// called instead once the program is read, with MaxStdin and the
	// plan's timeout (for input read from a stream); either way input
	// larger than MaxStdin is refused before a sandbox starts, not cut.
	Stdin     []byte
	ReadStdin func(size int64, wait time.Duration) ([]byte, error)
	// Labels are recorded with the run in the audit log (CheckLabels).
	Labels map[string]string
	// Workspace is a host directory for /workspace (the command line's
	// --workspace); "" for a fresh one, removed afterwards.
	Workspace string
	// Files are placed in the fresh workspace before the program starts,
	// owned by the program; CollectFiles lists the workspace's regular
	// files in the result after it ends. Neither goes with Workspace.
	Files        []File
	CollectFiles bool
	// AuditDB is the audit log's path; "" for audit.Path's default.
	// AuditLog, when set, is that log kept open by the door (a service):
	// the run's row goes there instead of a database opened for the run.
	AuditDB  string
	AuditLog *AuditLog
	// Stdout and Stderr, when set, receive the program's output live
	// (plain mode, supervisor.Options); unset, the result holds it.
	Stdout, Stderr io.Writer
	// Log receives nsbox's own messages about the run (the base root
	// being built, an audit log that failed after the run); nil discards
	// them.
	Log io.Writer
	// Trace records each step's time; nil for none.
	Trace *trace.Recorder
	// Later, when set, is handed the sandbox's teardown (the cgroup, the
	// mounts, the run directory, the workspace) to run after Run has
	// returned, so that a door can answer first (supervisor.FinishLater):
	// every process of the run is gone by then, and the row is finished.
	// A teardown that fails can then no longer fail the run; it returns
	// the error for the door to report. Unset, Run tears down first.
	Later func(teardown func() error)
	// Warm, when set, is a sandbox started ahead under Policy (a pool's,
	// WarmFits the flags): the run takes it instead of preparing one,
	// and tears it down. Its steps are otherwise the same: the input
	// checks, the program's bound, the audit row, the files.
	Warm *Warm
}

// File is one file placed in a fresh workspace before the program runs.
type File struct {
	Path string      // relative to /workspace; parents are created
	Data []byte      // its content
	Mode os.FileMode // permission bits; 0 for 0644
}

// Outcome is what a run leaves.
type Outcome struct {
	Result *result.Result
	// LostOutput is why the program's output did not reach Stdout or
	// Stderr (supervisor.Outcome.OutputError); nil when it did.
	LostOutput error
}

// Run does one run and returns its outcome; it never fails without a
// result. ctx stops the run (status killed, its cause as the reason).
func Run(ctx context.Context, req Request) Outcome {
	if req.Log == nil {
		req.Log = io.Discard
	}
	start := time.Now()
	r, lost, err := run(ctx, &req)
	if err != nil {
		// Refused: no sandbox was started. Still one result, and still a
		// row in the audit log when the log itself is fine.
		if r == nil {
			r = result.New(supervisor.NewID(), req.PolicyName)
		}
		r.Status = result.StatusSandboxError
		r.Error = result.StepError("input", err)
		r.DurationMS = time.Since(start).Milliseconds()
		if r.Error.Step != "audit" {
			RecordRefused(req.AuditDB, r, start, req.Log)
		}
	}
	addHint(r.Error)
	return Outcome{Result: r, LostOutput: lost}
}

// run does the run's steps. It returns the result, why the program's
// output did not reach Stdout or Stderr, and an error when the run was
// refused before a sandbox existed (the result, when not nil, then has
// what was known).
func run(ctx context.Context, req *Request) (r *result.Result, lostOutput, err error) {
	if w := req.Warm; w != nil {
		// A warm sandbox the run refuses before taking it is torn down
		// all the same: it is never handed to another run.
		defer func() {
			if !w.taken {
				w.Discard()
			}
		}()
	}
	tr := req.Trace
	pol := req.Policy
	if pol == nil {
		if pol, err = policies.Resolve(req.PolicyName); err != nil {
			return nil, nil, result.StepError("policy", err)
		}
	}
	if req.InputError != nil {
		return nil, nil, req.InputError
	}
	if err := checkInput(req); err != nil {
		return nil, nil, err
	}
	tr.Mark("policy and input")
	// The plan: the policy narrowed by the flags, checked against what
	// this host can enforce (fail closed). Nothing is created yet.
	var pl *plan.Plan
	if w := req.Warm; w != nil {
		// Taken, it is this run's: torn down on every path below.
		if w.pol != pol || !WarmFits(req.Flags) {
			return refused(pol, nil), nil, result.StepError("warm", errors.New("bug: a warm sandbox of another policy or plan"))
		}
		pl = w.pl
	} else if pl, err = planner.Make(pol, req.Flags, plan.ReadHost(pol.Sandbox.Require)); err != nil {
		return refused(pol, pl), nil, err
	}
	tr.Mark("plan")
	code, err := program(req, pl)
	var stdin []byte
	if err == nil {
		stdin, err = input(req, pl)
	}
	if err == nil {
		err = checkFiles(req.Files, pl)
	}
	if err != nil {
		return refused(pol, pl), nil, err
	}
	tr.Mark("read program")
	// The base root is built on first use; "building the base root" goes
	// to the log, stdout stays the result's.
	if req.Warm != nil {
		// Built when the sandbox was.
	} else if err := EnsureBase(context.Background(), pl.Root.Name, req.Log); err != nil {
		return refused(pol, pl), nil, result.StepError("rootfs", err)
	}
	tr.Mark("root build")

	// Every run is recorded: a run that cannot be is not started. The row
	// is written while the supervisor builds the sandbox, and the program
	// starts only once it is.
	id := supervisor.NewID()
	if req.Warm != nil {
		id = req.Warm.id
	}
	var row *Row
	if req.AuditLog != nil {
		row = BeginRowIn(req.AuditLog, id, pl.Policy, code, stdin, req.Labels)
	} else {
		row = BeginRow(req.AuditDB, id, pl.Policy, code, stdin, req.Labels)
	}
	defer row.Close()

	tr.Mark("audit begin")
	var sb *supervisor.Sandbox
	var prepErr error
	if req.Warm != nil {
		sb, req.Warm.taken = req.Warm.sb, true // Finish, below, tears it down
		prepErr = sb.SetOutput(req.Stdout, req.Stderr)
		if prepErr == nil {
			prepErr = sb.SetStdin(stdin)
		}
	} else {
		o := supervisor.Options{ID: id, Plan: pl, Workspace: req.Workspace, StateDir: supervisor.StateDir(), Trace: tr,
			Stdout: req.Stdout, Stderr: req.Stderr, Stdin: stdin}
		sb = supervisor.New(o)
		prepErr = sb.Prepare()
	}
	var files []result.File
	var filesErr error
	if prepErr == nil {
		placeErr := placeFiles(sb, req.Files)
		auditErr := row.Wait()
		tr.Mark("audit row")
		switch {
		case auditErr != nil:
			sb.Abort(result.StepError("audit", auditErr))
		case placeErr != nil:
			sb.Abort(result.StepError("files", placeErr))
		default:
			sb.Execute(ctx, code)
			if req.CollectFiles {
				files, filesErr = collectFiles(sb)
			}
		}
	}
	var out supervisor.Outcome
	var teardown func() error
	if req.Later != nil {
		out, teardown = sb.FinishLater()
	} else {
		out = sb.Finish()
	}
	r = out.Result
	switch {
	case filesErr != nil && r.Error == nil:
		// The program ran, but the caller asked for its files and cannot
		// have them: the run failed, as nsbox's own failure.
		r.Status = result.StatusSandboxError
		r.Error = result.StepError("files", filesErr)
		r.ExitCode, r.Signal = nil, nil
	case req.CollectFiles && r.Status != result.StatusSandboxError:
		r.Files = files
	}
	if err := row.Wait(); err != nil {
		// The program did not run; when the run failed before the audit
		// row was needed for another reason, say this too.
		if r.Error == nil || r.Error.Step != "audit" {
			fmt.Fprintf(req.Log, "nsbox: audit log: %v (run %s is not recorded)\n", err, id)
		}
	} else if err := row.Finish(r, out.Stats); err != nil {
		// The run happened and its result stands; its row stays unfinished.
		fmt.Fprintf(req.Log, "nsbox: audit log: %v (a later nsbox records run %s as killed: supervisor died)\n", err, id)
	}
	tr.Mark("audit finish")
	row.Close()
	tr.Mark("audit close")
	r.Phases = tr.Phases()
	if teardown != nil {
		req.Later(teardown)
	}
	return r, out.OutputError, nil
}

// checkInput refuses what the request itself gets wrong, before a plan.
func checkInput(req *Request) error {
	if err := CheckLabels(req.Labels); err != nil {
		return err
	}
	if req.Flags.Timeout < 0 {
		return fmt.Errorf("timeout %s: must be positive", req.Flags.Timeout)
	}
	if req.Flags.OutputLimit < 0 {
		return fmt.Errorf("output limit %d: must be positive", req.Flags.OutputLimit)
	}
	if req.Workspace != "" && (len(req.Files) > 0 || req.CollectFiles) {
		return errors.New("files in and out are for a fresh workspace, not a caller's directory")
	}
	return nil
}

// program returns the run's program, bounded by the plan.
func program(req *Request, pl *plan.Plan) ([]byte, error) {
	if req.ReadCode != nil {
		return req.ReadCode(pl.ProgramSize, pl.Timeout)
	}
	if int64(len(req.Code)) > pl.ProgramSize {
		return nil, TooBig(pl.ProgramSize)
	}
	if len(req.Code) == 0 {
		return nil, errors.New("the program is empty")
	}
	return req.Code, nil
}

// MaxStdin is the most standard input a program is given (Request.Stdin),
// as the largest program any policy accepts: the supervisor holds it in
// memory until the program has read it.
const MaxStdin = 64 << 20

// input returns the program's standard input, bounded by MaxStdin.
func input(req *Request, pl *plan.Plan) ([]byte, error) {
	if req.ReadStdin != nil {
		return req.ReadStdin(MaxStdin, pl.Timeout)
	}
	if len(req.Stdin) > MaxStdin {
		return nil, StdinTooBig(int64(len(req.Stdin)))
	}
	return req.Stdin, nil
}

// StdinTooBig is the refusal of standard input over MaxStdin; size is
// its length, or -1 when only "more than MaxStdin" is known (a stream
// read up to the limit).
func StdinTooBig(size int64) error {
	if size < 0 {
		return fmt.Errorf("the program's standard input is larger than %s, the most nsbox gives a program", policies.Size(MaxStdin))
	}
	return fmt.Errorf("the program's standard input is %d bytes, more than %s (%d bytes), the most nsbox gives a program", size, policies.Size(MaxStdin), MaxStdin)
}

// TooBig is the refusal of a program over limits.program_size (size).
func TooBig(size int64) error {
	return fmt.Errorf("the program is larger than %s, the most the policy accepts (limits.program_size)", policies.Size(size))
}

// refused is the result skeleton of a run refused once its policy was
// read: the policy's name and, when the plan was made, the limits the run
// would have had (without cgroup ones: no cgroup was made).
func refused(pol *policies.Policy, pl *plan.Plan) *result.Result {
	r := result.New(supervisor.NewID(), pol.Name)
	if pl != nil {
		r.Limits = pl.LimitsWithoutCgroup()
	}
	return r
}

// addHint appends what the caller can do to an error whose cause is
// theirs to fix: running out of descriptors (a low `ulimit -n`).
func addHint(e *result.SandboxError) {
	if e != nil && e.Errno == "EMFILE" {
		e.Message += " (nsbox ran out of file descriptors: raise its open-file limit, e.g. `ulimit -n 1024`)"
	}
}
