package session

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// The audit rows of cells, written the way nsbox run writes a run's: the
// row begun before the cell is sent, finished from its result. Kept to
// this one file so that it can call the run's own helpers once they live
// in a package of their own.

// maxStoredCode is the largest cell whose text a row keeps (with
// audit.store_code), as for a run.
const maxStoredCode = 256 << 10

// auditBegin records cell id as unfinished before it is sent, so that a
// service killed mid-cell leaves a row saying so.
func auditBegin(db *audit.DB, id string, pol plan.Policy, code []byte, labels map[string]string, version string) (*audit.Run, error) {
	sum := sha256.Sum256(code)
	rec := &audit.Run{
		ID: id, Start: time.Now(), Policy: pol.Name, PolicySHA256: pol.SHA256,
		CodeSHA256: hex.EncodeToString(sum[:]), Labels: labels, NsboxVersion: version,
	}
	if pol.StoreCode && len(code) <= maxStoredCode {
		s := string(code)
		rec.Code = &s
	}
	if err := db.Begin(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// auditFinish completes a cell's row from its result and stats.
func auditFinish(db *audit.DB, rec *audit.Run, r *result.Result, st supervisor.Stats) error {
	rec.End = time.Now()
	rec.DurationMS = r.DurationMS
	rec.Status = string(r.Status)
	rec.Reason = r.Reason
	if r.Reason == "" && r.Error != nil {
		rec.Reason = r.Error.Step + ": " + r.Error.Message
	}
	rec.ExitCode, rec.Signal = r.ExitCode, r.Signal
	rec.CPUMS, rec.PeakMemoryBytes = r.CPUMS, r.PeakMemoryBytes
	rec.StdoutBytes, rec.StderrBytes = st.StdoutBytes, st.StderrBytes
	rec.StdoutHead, rec.StderrHead = st.StdoutHead, st.StderrHead
	rec.StdoutTruncated, rec.StderrTruncated = r.StdoutTruncated, r.StderrTruncated
	rec.RootManifestSHA256 = st.RootManifestSHA256
	rec.Violations = r.Violations
	return db.Finish(rec)
}
