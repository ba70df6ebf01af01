package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/sandbox/result"
)

// DefaultPath is where the audit database lives unless NSBOX_AUDIT_DB or an
// --audit-db flag names another file.
const DefaultPath = "/var/lib/nsbox/audit.db"

// EnvPath is the environment variable that overrides DefaultPath.
const EnvPath = "NSBOX_AUDIT_DB"

// StatusUnfinished is the status of a row between Begin and Finish; a
// supervisor killed mid-run leaves its row so.
const StatusUnfinished = "unfinished"

// HeadBytes is how much of each output stream a row keeps.
const HeadBytes = 1024

// MaxReasonBytes is how much of a reason a row keeps.
const MaxReasonBytes = 1024

// ReasonSupervisorDied is the reason of a row that Reap finished: status
// killed, its supervisor gone without finishing it.
const ReasonSupervisorDied = "supervisor died"

// MaxConnectionTextBytes is how much of each text field of a connection
// (host, method, address, reason) a row keeps.
const MaxConnectionTextBytes = 1024

// Limits on labels, so that a caller cannot make rows arbitrarily large.
const (
	MaxLabels          = 32
	MaxLabelKeyBytes   = 128
	MaxLabelValueBytes = 1024
)

// Path returns the database to use: flag when set, else $NSBOX_AUDIT_DB when
// set, else DefaultPath.
func Path(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(EnvPath); env != "" {
		return env
	}
	if userns.NotRoot() {
		return filepath.Join(userns.StateHome(), "audit.db")
	}
	return DefaultPath
}

// Run is one row of the audit log.
type Run struct {
	ID                 string
	Start, End         time.Time // End is zero while unfinished
	DurationMS         int64
	Policy             string
	PolicySHA256       string
	RootManifestSHA256 string
	CodeSHA256         string
	Code               *string // only when the policy's audit.store_code is true
	Status             string  // the result's status; StatusUnfinished until Finish
	Reason             string  // why it ended: the result's reason (or error), ReasonSupervisorDied; valid UTF-8, at most MaxReasonBytes
	ExitCode, Signal   *int
	CPUMS              *int64
	PeakMemoryBytes    *int64
	StdoutBytes        int64  // total bytes the program wrote to stdout (may exceed what was kept)
	StderrBytes        int64  // likewise for stderr
	StdoutHead         []byte // the first HeadBytes of stdout; Finish cuts a longer one
	StderrHead         []byte // likewise for stderr
	StdoutTruncated    bool   // the result's stdout_truncated: output was cut at the policy's cap
	StderrTruncated    bool   // likewise for stderr
	Violations         []result.Violation
	Labels             map[string]string // --label key=value
	NsboxVersion       string
	// StdinSHA256 is the sha256 (hex) of the standard input the program
	// was given, all of it (nsbox run --stdin, the service's
	// stdin_base64); "" when it was given none. StdinBytes is its length.
	StdinSHA256 string
	StdinBytes  int64
	// Network is what the run did through nsbox's proxy in network
	// allowlist mode: the result's network section, nil for a run without
	// network. Finish keeps at most result.MaxConnectionRecords connections
	// (the rest count in ConnectionsDropped) and makes their text fields
	// valid UTF-8 of at most MaxConnectionTextBytes; a non-nil Network
	// needs a Mode.
	Network *result.Network
	// Supervisor is the process that began the row; Begin records the
	// calling process when nil. nil in rows from before it was recorded,
	// and when /proc could not tell.
	Supervisor *Supervisor

	// The chain fields, set by Finish and by the queries; ignored as input.
	Seq          int64  // position in the chain, from 1; 0 while unfinished
	PrevHash     string // hash of the finished row before this one; "" while unfinished
	Hash         string // this row's hash (package doc); "" while unfinished
	ChainVersion int    // the encoding Hash is of: 1 to 4 (package doc); 0 while unfinished
}

// Finished reports whether the row has been through Finish.
func (r *Run) Finished() bool { return r.Seq != 0 }

// ParseLabel splits a --label argument "key=value" and checks it as Begin
// will.
func ParseLabel(s string) (key, value string, err error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q: want key=value", s)
	}
	if err := checkLabel(key, value); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// checkLabel is the one definition of a valid label: a non-empty key without
// "=", both valid UTF-8 (they are printed and exported as text), both
// bounded in size.
func checkLabel(key, value string) error {
	switch {
	case key == "":
		return fmt.Errorf("label %q: empty key", key+"="+value)
	case strings.Contains(key, "="):
		return fmt.Errorf("label key %q: contains \"=\"", key)
	case !utf8.ValidString(key) || !utf8.ValidString(value):
		return fmt.Errorf("label %q: not valid UTF-8", key)
	case len(key) > MaxLabelKeyBytes:
		return fmt.Errorf("label key %.20q...: longer than %d bytes", key, MaxLabelKeyBytes)
	case len(value) > MaxLabelValueBytes:
		return fmt.Errorf("label %q: value longer than %d bytes", key, MaxLabelValueBytes)
	}
	return nil
}

// checkLabels checks a whole label set.
func checkLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels, at most %d allowed", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if err := checkLabel(k, v); err != nil {
			return err
		}
	}
	return nil
}

// clipReason makes the reason valid UTF-8 (invalid bytes become U+FFFD)
// of at most MaxReasonBytes, cut at a character boundary: it is text that
// Export carries exactly, with no _base64 twin.
func clipReason(r *Run) { r.Reason = clipText(r.Reason, MaxReasonBytes) }

// clipText makes s valid UTF-8 (invalid bytes become U+FFFD) of at most
// limit bytes, cut at a character boundary.
func clipText(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > limit {
		n := limit
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// clipNetwork replaces r.Network with a copy that Finish can store and
// Export carry exactly: at most result.MaxConnectionRecords connections,
// those past it counted in ConnectionsDropped, their text fields clipped
// (clipText); Connections is [] rather than nil. The caller's Network (the
// result's own) is left as it was.
func clipNetwork(r *Run) error {
	if r.Network == nil {
		return nil
	}
	if r.Network.Mode == "" {
		return errors.New("network section without a mode")
	}
	n := *r.Network
	conns := n.Connections
	if len(conns) > result.MaxConnectionRecords {
		n.ConnectionsDropped += len(conns) - result.MaxConnectionRecords
		conns = conns[:result.MaxConnectionRecords]
	}
	n.Connections = make([]result.Connection, len(conns))
	for i, c := range conns {
		c.Host = clipText(c.Host, MaxConnectionTextBytes)
		c.Method = clipText(c.Method, MaxConnectionTextBytes)
		c.Address = clipText(c.Address, MaxConnectionTextBytes)
		c.Reason = clipText(c.Reason, MaxConnectionTextBytes)
		n.Connections[i] = c
	}
	n.Mode = clipText(n.Mode, MaxConnectionTextBytes)
	n.Proxy = clipText(n.Proxy, MaxConnectionTextBytes)
	r.Network = &n
	return nil
}

// clipHeads cuts the heads to HeadBytes, so what is stored, hashed and left
// in r agree.
func clipHeads(r *Run) {
	if len(r.StdoutHead) > HeadBytes {
		r.StdoutHead = r.StdoutHead[:HeadBytes]
	}
	if len(r.StderrHead) > HeadBytes {
		r.StderrHead = r.StderrHead[:HeadBytes]
	}
}
