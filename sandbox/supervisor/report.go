package supervisor

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
)

// maxReport bounds what the supervisor keeps of the runner's report,
// besides one line of display outputs (reportCap); a program that floods
// the pipe (it is inherited) cannot grow the supervisor past it.
const maxReport = 1 << 20

// reportCap is what the supervisor keeps of a report under cfg.
func reportCap(cfg pyrunner.Config) int64 {
	if !cfg.Outputs {
		return maxReport
	}
	return maxReport + int64(cfg.MaxLine())
}

// reportReader drains the runner's report pipe while the program runs, so
// the runner never blocks on it, keeping at most reportCap bytes.
type reportReader struct {
	r    *os.File
	buf  firstLine
	done sync.WaitGroup
}

func readReport(r *os.File, max int64) *reportReader {
	rr := &reportReader{r: r, buf: firstLine{seen: make(chan struct{})}}
	rr.done.Add(1)
	go func() {
		defer rr.done.Done()
		io.Copy(&rr.buf, io.LimitReader(r, max))
		rr.buf.end()
		io.Copy(io.Discard, r) // keep draining past the cap
	}()
	return rr
}

// firstLine is a buffer that also keeps a copy of its first line, and
// closes seen once it has it (or at the end, without one).
type firstLine struct {
	buf  bytes.Buffer // not embedded: io.Copy would use its ReadFrom, not Write
	line []byte
	seen chan struct{}
	once sync.Once
}

func (f *firstLine) Write(p []byte) (int, error) {
	n, err := f.buf.Write(p)
	if f.line == nil {
		if i := bytes.IndexByte(f.buf.Bytes(), '\n'); i >= 0 {
			f.line = bytes.Clone(f.buf.Bytes()[:i])
			f.once.Do(func() { close(f.seen) })
		}
	}
	return n, err
}

func (f *firstLine) end() { f.once.Do(func() { close(f.seen) }) }

// finish waits for EOF (every copy of the write end is closed once the
// sandbox is gone) and parses what the runner reported.
func (rr *reportReader) finish() (pyrunner.Report, error) {
	rr.done.Wait()
	rr.r.Close()
	rep, err := pyrunner.ParseReport(&rr.buf.buf)
	if err != nil {
		return rep, fmt.Errorf("runner report: %w", err)
	}
	return rep, nil
}

// applyReport records the violations in r and decides whether the Python
// policy layer, not the program, ended the run:
//   - the static check found violations: nothing ran; policy_violation;
//   - the program died of an uncaught exception (exit 1) after the runtime
//     layer refused something: policy_violation (a signal or another exit
//     code keeps its own status);
//   - the runner ended the run with the policy exit code after its status
//     line: it refused something it could no longer report, because the
//     program closed or replaced the report channel (a program's own exit
//     with that code reads the same): policy_violation, with a violation
//     saying so;
//   - otherwise the status stays what the program's exit made it, with the
//     violations listed (a program that caught the refusal and went on).
func applyReport(r *result.Result, rep pyrunner.Report) {
	recordViolations(r, rep)
	r.Outputs, r.OutputsTruncated = rep.Outputs, rep.OutputsTruncated
	switch {
	case rep.Static == pyrunner.StaticOK && r.Status == result.StatusError && r.ExitCode != nil &&
		*r.ExitCode == pyrunner.ExitPolicyViolation:
		r.Violations = append(r.Violations, result.Violation{Kind: pyrunner.KindEvent, Name: pyrunner.ForgedLine,
			Detail: "the run ended with the policy exit code after the status line: the runner refused something " +
				"it could not report, because the program closed or replaced the report channel (or the program " +
				"exited with that code itself)"})
		r.Status = result.StatusPolicyViolation
		r.Reason = "the runner ended the program: the report channel was closed or replaced"
	case rep.Static == pyrunner.StaticViolations:
		r.Status = result.StatusPolicyViolation
		r.Reason = fmt.Sprintf("%d violation(s) of the policy's Python allowlist; nothing ran", len(r.Violations))
	case len(rep.RuntimeViolations()) > 0 && r.Status == result.StatusError && r.ExitCode != nil && *r.ExitCode == 1:
		r.Status = result.StatusPolicyViolation
		r.Reason = fmt.Sprintf("the program failed after %d refused action(s)", len(r.Violations))
	}
}

// runnerFailed reports a runner that could not start (bad config or report
// fd: exit 125 before its status line) as nsbox's own failure, not the
// program's. The start of its stderr says why.
func runnerFailed(r *result.Result, rep pyrunner.Report) error {
	if rep.Static != "" || r.ExitCode == nil || *r.ExitCode != pyrunner.ExitRunnerError {
		return nil
	}
	why, _ := result.EncodeText(bytes.TrimSpace(head(r.StderrBytes(), headSize)))
	return fmt.Errorf("the Python runner failed before checking the program: %s", why)
}

// recordViolations copies the runner's violations into r.
func recordViolations(r *result.Result, rep pyrunner.Report) {
	for _, v := range rep.Violations {
		r.Violations = append(r.Violations, result.Violation{Kind: v.Kind, Name: v.Name, Line: v.Line, Col: v.Col, Detail: v.Detail})
	}
}
