package main

// Output of the nsbox audit commands: JSON, tables and the text views of
// runs and stats. Text from the sandboxed program is escaped before it
// reaches a terminal.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/result"
)

// writeAuditJSON prints v indented, as doctor --json does, without HTML escaping.
func writeAuditJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// auditLabelText is "k=v k=v", sorted by key.
func auditLabelText(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, " ")
}

// auditOrphan reports whether r was finished by a reaper: killed because
// its supervisor died, its end and duration bounds rather than measures.
func auditOrphan(r *audit.Run) bool {
	return r.Status == string(result.StatusKilled) && r.Reason == audit.ReasonSupervisorDied
}

func auditDuration(r *audit.Run) string {
	if !r.Finished() {
		return "-"
	}
	if auditOrphan(r) {
		return "≤" + (time.Duration(r.DurationMS) * time.Millisecond).String()
	}
	return (time.Duration(r.DurationMS) * time.Millisecond).String()
}

func auditExitText(r *audit.Run) string {
	switch {
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	case r.Signal != nil:
		return "signal " + strconv.Itoa(*r.Signal)
	}
	return "-"
}

// auditCell makes a one-line table cell of s: values such as violation names
// and output come from the sandboxed program, so control characters
// (terminal escapes, tabs that would break the columns, newlines) and
// invalid UTF-8 are shown escaped rather than sent to the terminal.
func auditCell(s string) string { return auditEscape(s, false) }

// auditEscape quotes what is not printable; keepLines leaves newlines and tabs
// alone, for blocks of output.
func auditEscape(s string, keepLines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\\' && !keepLines:
			b.WriteString(`\\`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// writeAuditRunText prints one run as fields, then its violations, output heads
// and code.
func writeAuditRunText(out io.Writer, r *audit.Run) error {
	w := &auditErrWriter{w: out}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{name}, args...)...)
	}
	field("id", "%s", auditCell(r.ID))
	field("status", "%s", auditCell(r.Status))
	field("reason", "%s", auditOr(r.Reason))
	field("exit", "%s", auditExitText(r))
	field("policy", "%s (sha256 %s)", auditCell(r.Policy), auditOr(r.PolicySHA256))
	field("started", "%s", r.Start.Local().Format(time.RFC3339Nano))
	if r.Finished() && auditOrphan(r) {
		field("ended", "%s (at the latest: its supervisor had died by then)",
			r.End.Local().Format(time.RFC3339Nano))
	} else if r.Finished() {
		field("ended", "%s", r.End.Local().Format(time.RFC3339Nano))
	}
	field("duration", "%s", auditDuration(r))
	field("cpu", "%s", auditMS(r.CPUMS))
	field("peak memory", "%s", auditBytes(r.PeakMemoryBytes))
	field("stdout", "%d bytes%s", r.StdoutBytes, auditTruncated(r.StdoutTruncated))
	field("stderr", "%d bytes%s", r.StderrBytes, auditTruncated(r.StderrTruncated))
	field("root manifest", "sha256 %s", auditOr(r.RootManifestSHA256))
	if r.Code != nil {
		field("code", "sha256 %s", auditOr(r.CodeSHA256))
	} else {
		field("code", "sha256 %s (not stored: the policy's audit.store_code is false)", auditOr(r.CodeSHA256))
	}
	if r.StdinSHA256 != "" {
		field("stdin", "%d bytes, sha256 %s (not stored)", r.StdinBytes, r.StdinSHA256)
	} else {
		field("stdin", "- (none given)")
	}
	field("network", "%s", auditNetworkText(r.Network))
	field("labels", "%s", auditOr(auditLabelText(r.Labels)))
	field("nsbox version", "%s", auditOr(r.NsboxVersion))
	if s := r.Supervisor; s != nil {
		field("supervisor", "pid %d, started at tick %d of boot %s of machine %s, %s",
			s.PID, s.StartTicks, auditCell(s.BootID), auditOr(s.MachineID), auditCell(s.Namespaces))
	} else {
		field("supervisor", "- (not recorded)")
	}
	if r.Finished() {
		field("chain", "seq %d, hash %s, prev %s, encoding v%d", r.Seq, r.Hash, r.PrevHash, r.ChainVersion)
	} else {
		field("chain", "not yet (unfinished)")
	}
	tw.Flush()
	if len(r.Violations) > 0 {
		fmt.Fprintln(w, "\nViolations:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tNAME\tLINE:COL\tDETAIL")
		for _, v := range r.Violations {
			fmt.Fprintf(tw, "%s\t%s\t%d:%d\t%s\n", auditCell(v.Kind), auditCell(v.Name), v.Line, v.Col, auditCell(v.Detail))
		}
		tw.Flush()
	}
	if n := r.Network; n != nil && len(n.Connections) > 0 {
		fmt.Fprintln(w, "\nConnections:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tPORT\tMETHOD\tADDRESS\tALLOWED\tSENT\tRECEIVED\tSTART\tDURATION\tREASON")
		for _, c := range n.Connections {
			allowed := "no"
			if c.Allowed {
				allowed = "yes"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", auditCell(c.Host), c.Port, auditOr(c.Method),
				auditOr(c.Address), allowed, c.BytesSent, c.BytesReceived, auditMS(&c.StartMS), auditMS(&c.DurationMS),
				auditOr(c.Reason))
		}
		tw.Flush()
		if n.ConnectionsDropped > 0 {
			fmt.Fprintf(w, "(and %d more connections, counted in the totals but not listed)\n", n.ConnectionsDropped)
		}
	}
	block := func(title string, b []byte) {
		if len(b) > 0 {
			fmt.Fprintf(w, "\n--- %s ---\n%s", title, auditEscape(string(b), true))
			if b[len(b)-1] != '\n' {
				fmt.Fprintln(w)
			}
		}
	}
	block(fmt.Sprintf("stdout, first %d bytes", len(r.StdoutHead)), r.StdoutHead)
	block(fmt.Sprintf("stderr, first %d bytes", len(r.StderrHead)), r.StderrHead)
	if r.Code != nil {
		block("code", []byte(*r.Code))
	}
	return w.err
}

// auditNetworkText is the one-line summary of a run's network section, or
// "-" for a run without network.
func auditNetworkText(n *result.Network) string {
	if n == nil {
		return "-"
	}
	listed := len(n.Connections) + n.ConnectionsDropped
	return fmt.Sprintf("%s via %s: %d connection(s), %d refused; %d bytes sent, %d received",
		auditOr(n.Mode), auditOr(n.Proxy), listed, n.Refused, n.BytesSent, n.BytesReceived)
}

// writeAuditStatsText prints the summary as a few small tables.
func writeAuditStatsText(out io.Writer, s *audit.Stats) error {
	w := &auditErrWriter{w: out}
	fmt.Fprintf(w, "Runs: %d (%d unfinished, %d killed as their supervisor died)\n", s.Total, s.Unfinished, s.SupervisorDied)
	if s.OutOfChain > 0 {
		fmt.Fprintf(w, "Not counted: %d finished row(s) outside the hash chain (run `nsbox audit verify`)\n", s.OutOfChain)
	}
	table := func(title, header string, rows [][]string) {
		fmt.Fprintf(w, "\n%s:\n", title)
		if len(rows) == 0 {
			fmt.Fprintln(w, "  none")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+header)
		for _, r := range rows {
			fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
		}
		tw.Flush()
	}
	var rows [][]string
	for _, st := range slices.Sorted(maps.Keys(s.ByStatus)) {
		rows = append(rows, []string{auditCell(st), strconv.Itoa(s.ByStatus[st])})
	}
	table("By status", "STATUS\tRUNS", rows)
	counts := func(cs []audit.Count) [][]string {
		var rows [][]string
		for _, c := range cs {
			rows = append(rows, []string{auditCell(c.Name), strconv.Itoa(c.Runs), strconv.Itoa(c.Times)})
		}
		return rows
	}
	table("Most refused imports", "MODULE\tRUNS\tTIMES", counts(s.TopImports))
	table("Most refused audit events", "EVENT\tRUNS\tTIMES", counts(s.TopEvents))
	fmt.Fprintf(w, "\nNetwork: %d run(s) in allowlist mode, %d connection(s) refused\n", s.NetworkRuns, s.RefusedConnections)
	table("Most refused network targets", "TARGET\tRUNS\tTIMES", counts(s.TopNetwork))
	rows = nil
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	for _, p := range s.SlowestPolicies {
		rows = append(rows, []string{auditCell(p.Policy), strconv.Itoa(p.Runs), ms(p.MedianMS), ms(p.P95MS), ms(p.MaxMS)})
	}
	table("Slowest policies", "POLICY\tRUNS\tMEDIAN\tP95\tMAX", rows)
	return w.err
}

// auditErrWriter keeps the first write error, so that a text report of many
// small writes is checked once at its end.
type auditErrWriter struct {
	w   io.Writer
	err error
}

func (e *auditErrWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// auditReasonCell is how much of a reason a table shows; show has it all.
const auditReasonCell = 40

// auditShorten cuts s to at most n characters, marking the cut with "…".
func auditShorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// auditOr is auditCell(s), or "-" for an empty s.
func auditOr(s string) string {
	if s == "" {
		return "-"
	}
	return auditCell(s)
}

func auditMS(v *int64) string {
	if v == nil {
		return "-"
	}
	return (time.Duration(*v) * time.Millisecond).String()
}

// auditBytes prints a size in the largest binary unit that keeps it >= 1.
func auditBytes(v *int64) string {
	if v == nil {
		return "-"
	}
	n, unit := float64(*v), 0
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	for n >= 1024 && unit < len(units)-1 {
		n /= 1024
		unit++
	}
	if unit == 0 {
		return fmt.Sprintf("%d B", *v)
	}
	return fmt.Sprintf("%.1f %s", n, units[unit])
}

func auditTruncated(t bool) string {
	if t {
		return " (truncated at the policy's cap)"
	}
	return ""
}
