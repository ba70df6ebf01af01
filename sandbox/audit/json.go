package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// runJSON is the JSON form of a Run: what `nsbox audit show --json`, list
// --json and export print. Bytes follow the result's convention: the text
// with invalid UTF-8 replaced by U+FFFD, and the exact bytes in a _base64
// twin only when they are not valid UTF-8. So every hashed value is in the
// object exactly.
type runJSON struct {
	ID                 string             `json:"id"`
	Seq                int64              `json:"seq"` // 0 while unfinished
	Start              time.Time          `json:"start"`
	End                *time.Time         `json:"end"` // null while unfinished
	DurationMS         int64              `json:"duration_ms"`
	Policy             string             `json:"policy"`
	PolicySHA256       string             `json:"policy_sha256"`
	RootManifestSHA256 string             `json:"root_manifest_sha256"`
	CodeSHA256         string             `json:"code_sha256"`
	Code               *string            `json:"code"` // null when not stored
	CodeBase64         string             `json:"code_base64,omitempty"`
	StdinSHA256        string             `json:"stdin_sha256"` // "" when the program was given no input
	StdinBytes         int64              `json:"stdin_bytes"`
	Status             string             `json:"status"`
	Reason             string             `json:"reason"` // "" when none
	ExitCode           *int               `json:"exit_code"`
	Signal             *int               `json:"signal"`
	CPUMS              *int64             `json:"cpu_ms"`
	PeakMemoryBytes    *int64             `json:"peak_memory_bytes"`
	StdoutBytes        int64              `json:"stdout_bytes"`
	StderrBytes        int64              `json:"stderr_bytes"`
	StdoutHead         string             `json:"stdout_head"`
	StdoutHeadBase64   string             `json:"stdout_head_base64,omitempty"`
	StderrHead         string             `json:"stderr_head"`
	StderrHeadBase64   string             `json:"stderr_head_base64,omitempty"`
	StdoutTruncated    bool               `json:"stdout_truncated"`
	StderrTruncated    bool               `json:"stderr_truncated"`
	Violations         []result.Violation `json:"violations"` // [] when none
	Labels             map[string]string  `json:"labels"`     // {} when none
	NsboxVersion       string             `json:"nsbox_version"`
	Network            *result.Network    `json:"network"`       // null for a run without network
	Supervisor         *Supervisor        `json:"supervisor"`    // null when none was recorded
	ChainVersion       int                `json:"chain_version"` // the hash's encoding; 0 while unfinished
	PrevHash           string             `json:"prev_hash"`     // "" while unfinished
	Hash               string             `json:"hash"`          // "" while unfinished
}

// MarshalJSON writes r as one JSON object (runJSON), without HTML escaping.
func (r Run) MarshalJSON() ([]byte, error) {
	j := runJSON{
		ID: r.ID, Seq: r.Seq, Start: r.Start.UTC(), DurationMS: r.DurationMS,
		Policy: r.Policy, PolicySHA256: r.PolicySHA256, RootManifestSHA256: r.RootManifestSHA256,
		CodeSHA256: r.CodeSHA256, StdinSHA256: r.StdinSHA256, StdinBytes: r.StdinBytes, Status: r.Status, Reason: r.Reason, ExitCode: r.ExitCode, Signal: r.Signal,
		CPUMS: r.CPUMS, PeakMemoryBytes: r.PeakMemoryBytes,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated,
		Violations: r.Violations, Labels: r.Labels, NsboxVersion: r.NsboxVersion,
		Network: r.Network, Supervisor: r.Supervisor, ChainVersion: r.ChainVersion, PrevHash: r.PrevHash, Hash: r.Hash,
	}
	if !r.End.IsZero() {
		end := r.End.UTC()
		j.End = &end
	}
	if r.Code != nil {
		text, b64 := result.EncodeText([]byte(*r.Code))
		j.Code, j.CodeBase64 = &text, b64
	}
	j.StdoutHead, j.StdoutHeadBase64 = result.EncodeText(r.StdoutHead)
	j.StderrHead, j.StderrHeadBase64 = result.EncodeText(r.StderrHead)
	if j.Violations == nil {
		j.Violations = []result.Violation{}
	}
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&j); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads what MarshalJSON writes, exactly: the _base64 twins
// take precedence over the text.
func (r *Run) UnmarshalJSON(b []byte) error {
	var j runJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Run{
		ID: j.ID, Seq: j.Seq, Start: j.Start, DurationMS: j.DurationMS,
		Policy: j.Policy, PolicySHA256: j.PolicySHA256, RootManifestSHA256: j.RootManifestSHA256,
		CodeSHA256: j.CodeSHA256, StdinSHA256: j.StdinSHA256, StdinBytes: j.StdinBytes, Status: j.Status, Reason: j.Reason, ExitCode: j.ExitCode, Signal: j.Signal,
		CPUMS: j.CPUMS, PeakMemoryBytes: j.PeakMemoryBytes,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes,
		StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
		Violations: j.Violations, Labels: j.Labels, NsboxVersion: j.NsboxVersion,
		Network: j.Network, Supervisor: j.Supervisor, ChainVersion: j.ChainVersion, PrevHash: j.PrevHash, Hash: j.Hash,
	}
	if j.End != nil {
		r.End = *j.End
	}
	var err error
	decode := func(field, text, b64 string) []byte {
		if b64 == "" {
			return []byte(text)
		}
		out, derr := base64.StdEncoding.DecodeString(b64)
		if derr != nil && err == nil {
			err = fmt.Errorf("%s_base64: %w", field, derr)
		}
		return out
	}
	if j.Code != nil {
		code := string(decode("code", *j.Code, j.CodeBase64))
		r.Code = &code
	}
	r.StdoutHead = decode("stdout_head", j.StdoutHead, j.StdoutHeadBase64)
	r.StderrHead = decode("stderr_head", j.StderrHead, j.StderrHeadBase64)
	return err
}
