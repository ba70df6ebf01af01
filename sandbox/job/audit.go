package job

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// maxStoredCode is the largest program whose text a row keeps (with
// audit.store_code); a larger one keeps only its hash. Policies may accept
// bigger programs (limits.program_size), and a row should not grow with
// them.
const maxStoredCode = 256 << 10

// Row is one run's audit row, begun in the background: the run (or the
// session's cell) that owns it calls Wait before its program starts,
// Finish once it has a result, and Close last.
type Row struct {
	done   chan struct{} // the row is written, or failed to be
	reaped chan struct{} // and other runs' orphaned rows are finished
	db     *audit.DB
	shared bool // db is an AuditLog's: Close leaves it open
	rec    *audit.Run
	err    error
}

// reapInRunDeadline bounds what a run spends finishing other runs' orphaned
// rows, should the log be locked: the work itself is bounded by
// audit.ReapInRun.
const reapInRunDeadline = time.Second

// BeginRow opens the log at path (audit.Path's default when "") and
// records run id as unfinished, in the background; Wait returns the
// outcome. Then, still in the background while the sandbox is built and
// the program runs, it finishes rows whose supervisor died (audit.ReapInRun
// of them at most), so that the log catches up with the supervisors killed
// since the last run.
func BeginRow(path, id string, pol plan.Policy, code, stdin []byte, labels map[string]string) *Row {
	a := &Row{done: make(chan struct{}), reaped: make(chan struct{})}
	go func() {
		defer close(a.reaped)
		if !a.begin(audit.Path(path), id, pol, code, stdin, labels) {
			return
		}
		reapOrphans(a.db, audit.ReapInRun, reapInRunDeadline)
	}()
	return a
}

// BeginRowIn is BeginRow in a log the door keeps open (AuditLog): no
// open and no reaping (OpenAuditLog did it); Close leaves the log open.
func BeginRowIn(l *AuditLog, id string, pol plan.Policy, code, stdin []byte, labels map[string]string) *Row {
	a := &Row{done: make(chan struct{}), reaped: make(chan struct{}), shared: true}
	close(a.reaped)
	go func() {
		defer close(a.done)
		if a.db, a.err = l.current(); a.err == nil {
			a.rec, a.err = BeginRecord(a.db, id, pol, code, stdin, labels)
		}
	}()
	return a
}

func (a *Row) begin(path, id string, pol plan.Policy, code, stdin []byte, labels map[string]string) bool {
	defer close(a.done)
	db, err := audit.Open(path)
	if err != nil {
		a.err = err
		return false
	}
	a.db = db
	a.rec, a.err = BeginRecord(db, id, pol, code, stdin, labels)
	return a.err == nil
}

// reapOrphans finishes other runs' orphaned rows for a run. Its errors are
// dropped: the run's own result and row do not depend on other rows, and
// every nsbox audit command reaps again and reports what it cannot do.
func reapOrphans(db *audit.DB, lim audit.ReapLimits, deadline time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, _ = db.Reap(ctx, lim)
}

// Wait blocks until the row is written (or failed to be); it may be
// called any number of times.
func (a *Row) Wait() error {
	<-a.done
	return a.err
}

// Finish completes the row from the result and the run's stats. The row
// must have been written (Wait returned nil).
func (a *Row) Finish(r *result.Result, st supervisor.Stats) error {
	if err := a.Wait(); err != nil {
		return err
	}
	return FinishRecord(a.db, a.rec, r, st)
}

// Close closes the log once the background work is done; again, it does
// nothing. The last connection checkpoints the WAL: it fsyncs.
func (a *Row) Close() {
	<-a.done
	<-a.reaped
	if a.db != nil && !a.shared {
		a.db.Close()
	}
	a.db = nil
}

// BeginRecord records run id as unfinished in db before anything starts,
// so a supervisor killed mid-run leaves a row saying so: a run's row
// (BeginRow) or a session cell's (sandbox/session), written the same way.
// stdin is the program's standard input, nil for none: the row keeps its
// digest and length, never the bytes.
func BeginRecord(db *audit.DB, id string, pol plan.Policy, code, stdin []byte, labels map[string]string) (*audit.Run, error) {
	sum := sha256.Sum256(code)
	rec := &audit.Run{
		ID: id, Start: time.Now(), Policy: pol.Name, PolicySHA256: pol.SHA256,
		CodeSHA256: hex.EncodeToString(sum[:]), Labels: labels, NsboxVersion: Version,
	}
	if stdin != nil {
		sum := sha256.Sum256(stdin)
		rec.StdinSHA256, rec.StdinBytes = hex.EncodeToString(sum[:]), int64(len(stdin))
	}
	// The text is kept up to maxStoredCode; the hash always covers the
	// whole program.
	if pol.StoreCode && len(code) <= maxStoredCode {
		s := string(code)
		rec.Code = &s
	}
	if err := db.Begin(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// FinishRecord completes a row BeginRecord began, from the result and the
// run's stats.
func FinishRecord(db *audit.DB, rec *audit.Run, r *result.Result, st supervisor.Stats) error {
	rec.End = time.Now()
	rec.DurationMS = r.DurationMS
	rec.Status = string(r.Status)
	rec.Reason = auditReason(r)
	rec.ExitCode, rec.Signal = r.ExitCode, r.Signal
	rec.CPUMS, rec.PeakMemoryBytes = r.CPUMS, r.PeakMemoryBytes
	rec.StdoutBytes, rec.StderrBytes = st.StdoutBytes, st.StderrBytes
	rec.StdoutHead, rec.StderrHead = st.StdoutHead, st.StderrHead
	rec.StdoutTruncated, rec.StderrTruncated = r.StdoutTruncated, r.StderrTruncated
	rec.RootManifestSHA256 = st.RootManifestSHA256
	rec.Violations = r.Violations
	rec.Network = r.Network
	return db.Finish(rec)
}

// RecordRefused records a run refused before it started (a bad policy,
// flag or program) as a finished sandbox_error row in the log at path, so
// the log shows every run attempt, not only the ones that got a sandbox.
// Failing to record it is reported on log: the refusal itself stands.
func RecordRefused(path string, r *result.Result, start time.Time, log io.Writer) {
	db, err := audit.Open(audit.Path(path))
	if err != nil {
		fmt.Fprintf(log, "nsbox: audit log: %v (refused run %s not recorded)\n", err, r.ID)
		return
	}
	defer db.Close()
	rec := &audit.Run{ID: r.ID, Start: start, End: time.Now(), DurationMS: r.DurationMS,
		Policy: r.Policy, Status: string(r.Status), Reason: auditReason(r),
		Network: r.Network, NsboxVersion: Version}
	if err := db.Finish(rec); err != nil {
		fmt.Fprintf(log, "nsbox: audit log: %v (refused run %s not recorded)\n", err, r.ID)
	}
	reapOrphans(db, audit.ReapInRun, reapInRunDeadline)
}

// auditReason is why the run ended as the row keeps it: the result's
// reason, or for a sandbox error its step and message.
func auditReason(r *result.Result) string {
	if r.Reason == "" && r.Error != nil {
		return r.Error.Step + ": " + r.Error.Message
	}
	return r.Reason
}
