package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// labelKey reports whether k is what --label accepts as a key: 1-64
// characters of A-Z a-z 0-9 _ . -. Checked by hand: the equivalent regexp,
// compiled at start-up, was the largest package initialiser of every run
// (the {1,64} unrolls into hundreds of allocations).
func labelKey(k string) bool {
	if len(k) == 0 || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// parseLabels reads repeated --label key=value flags. Whatever the audit
// log could not store is refused here, as bad input, so that the refusal
// is still recorded.
func parseLabels(flags []string) (map[string]string, error) {
	if len(flags) > audit.MaxLabels {
		return nil, fmt.Errorf("--label given %d times: at most %d labels per run", len(flags), audit.MaxLabels)
	}
	labels := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("--label %q: want key=value", f)
		case !labelKey(k):
			return nil, fmt.Errorf("--label %q: the key must be 1-64 characters of A-Z a-z 0-9 _ . -", f)
		case len(v) > audit.MaxLabelValueBytes:
			return nil, fmt.Errorf("--label %q: the value is longer than %d bytes", k, audit.MaxLabelValueBytes)
		case !utf8.ValidString(v):
			return nil, fmt.Errorf("--label %q: the value is not valid UTF-8", k)
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("--label %q: key given twice", k)
		}
		labels[k] = v
	}
	return labels, nil
}

// maxStoredCode is the largest program whose text a row keeps (with
// audit.store_code); a larger one keeps only its hash. Policies may accept
// bigger programs (limits.program_size), and a row should not grow with
// them.
const maxStoredCode = 256 << 10

// pendingAudit is a run's audit row being begun in the background.
type pendingAudit struct {
	done   chan struct{} // the row is written, or failed to be
	reaped chan struct{} // and other runs' orphaned rows are finished
	db     *audit.DB
	rec    *audit.Run
	err    error
}

// reapInRunDeadline bounds what a run spends finishing other runs' orphaned
// rows, should the log be locked: the work itself is bounded by
// audit.ReapInRun.
const reapInRunDeadline = time.Second

// beginAudit opens the log at path and records the run as unfinished, in
// the background; wait returns the outcome. Then, still in the background
// while the sandbox is built and the program runs, it finishes rows whose
// supervisor died (audit.ReapInRun of them at most), so that the log
// catches up with the supervisors killed since the last run.
func beginAudit(path, id string, pol plan.Policy, code []byte, labels map[string]string) *pendingAudit {
	a := &pendingAudit{done: make(chan struct{}), reaped: make(chan struct{})}
	go func() {
		defer close(a.reaped)
		if !a.begin(path, id, pol, code, labels) {
			return
		}
		reapOrphans(a.db, audit.ReapInRun, reapInRunDeadline)
	}()
	return a
}

func (a *pendingAudit) begin(path, id string, pol plan.Policy, code []byte, labels map[string]string) bool {
	defer close(a.done)
	db, err := audit.Open(path)
	if err != nil {
		a.err = err
		return false
	}
	a.db = db
	a.rec, a.err = auditBegin(db, id, pol, code, labels)
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

// wait blocks until the row is written (or failed to be); it may be
// called any number of times.
func (a *pendingAudit) wait() error {
	<-a.done
	return a.err
}

// close closes the log once the background work is done; again, it does
// nothing.
func (a *pendingAudit) close() {
	<-a.done
	<-a.reaped
	if a.db != nil {
		a.db.Close()
		a.db = nil
	}
}

// auditBegin records the run as unfinished before anything starts, so a
// supervisor killed mid-run leaves a row saying so.
func auditBegin(db *audit.DB, id string, pol plan.Policy, code []byte, labels map[string]string) (*audit.Run, error) {
	sum := sha256.Sum256(code)
	rec := &audit.Run{
		ID: id, Start: time.Now(), Policy: pol.Name, PolicySHA256: pol.SHA256,
		CodeSHA256: hex.EncodeToString(sum[:]), Labels: labels, NsboxVersion: version,
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

// auditFinish completes the row from the result and the run's stats.
func auditFinish(db *audit.DB, rec *audit.Run, r *result.Result, st supervisor.Stats) error {
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
	return db.Finish(rec)
}

// auditRefused records a run refused before it started (a bad policy,
// flag or program) as a finished sandbox_error row, so the log shows every
// nsbox run attempt, not only the ones that got a sandbox. Failing to
// record it is reported on stderr: the refusal itself stands.
func auditRefused(flag string, r *result.Result, start time.Time) {
	db, err := audit.Open(audit.Path(flag))
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: audit log: %v (refused run %s not recorded)\n", err, r.ID)
		return
	}
	defer db.Close()
	rec := &audit.Run{ID: r.ID, Start: start, End: time.Now(), DurationMS: r.DurationMS,
		Policy: r.Policy, Status: string(r.Status), Reason: auditReason(r), NsboxVersion: version}
	if err := db.Finish(rec); err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: audit log: %v (refused run %s not recorded)\n", err, r.ID)
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
