package pyrunner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nsbox/nsbox/sandbox/result"
)

// The kinds of Violation.Kind.
const (
	KindImport    = "import"    // a module the allowlist refuses (also json.codecs)
	KindBuiltin   = "builtin"   // a denied builtin, or a denied write through open
	KindEvent     = "event"     // a denied audit event, or the report pipe
	KindAttribute = "attribute" // strict_attrs: underscore names, frames
	KindNetwork   = "network"   // Config.Proxy: a route around the proxy (runner/network.py)
	KindConstruct = "construct" // PythonRestricted: a construct the restricted compiler refuses (match, async, a metaclass)
)

// The values of Report.Static.
const (
	StaticOK          = "ok"
	StaticViolations  = "violations"
	StaticSyntaxError = "syntax_error"
)

// maxLine bounds one report line without outputs; the runner's longest
// is a few KiB. Lines with outputs are bounded by lineLimit.
const maxLine = 64 << 10

// Violation is one report line.
type Violation struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`   // the module, builtin, event or attribute
	Line   int    `json:"line"`   // 1-based; 0 when no line of the program is to blame
	Col    int    `json:"col"`    // 0-based, in characters
	Detail string `json:"detail"` // one sentence for humans
	// Runtime is set by ParseReport, not sent: the line came after the
	// static status line, while the program ran.
	Runtime bool `json:"runtime"`
}

// Report is what the runner wrote on its report pipe.
type Report struct {
	// Ready is set by the ready line, the first the runner writes (mode
	// run and check, before it reads the program; a session's comes as an
	// event instead).
	Ready bool
	// Static is the status line's verdict: StaticOK, StaticViolations,
	// StaticSyntaxError, or "" when the runner never wrote one (it failed
	// to start or was killed during the check).
	Static string
	// Count is the number of static violations found, which can exceed the
	// static lines written (MaxViolationLines).
	Count int
	// Violations are static ones first, then runtime ones, as written.
	Violations []Violation
	// SyntaxLine, SyntaxCol and SyntaxDetail locate a syntax error.
	SyntaxLine, SyntaxCol int
	SyntaxDetail          string
	// Outputs are the display outputs written after the program
	// (Config.Outputs), and OutputsTruncated whether some were dropped.
	// The runner writes them last; a program that forges an earlier
	// outputs line is overridden by the runner's.
	Outputs          []result.Output
	OutputsTruncated bool
	// Malformed counts lines that were skipped: not JSON, an unknown kind,
	// too long, or a second status line (only the program can write one).
	// The first one after the status line is also a runtime violation
	// (ForgedLine): the runner writes only whole, valid lines, so the
	// program wrote to the channel, and a part line of its would have
	// spoilt the runner's next one.
	Malformed int
}

// ForgedLine is the Violation.Name of a line on the report channel that
// the runner did not write (Kind KindEvent).
const ForgedLine = "report"

// wireLine is any report line; Static tells the status line apart.
type wireLine struct {
	Static *string `json:"static"`
	Count  int     `json:"count"`
	Kind   string  `json:"kind"`
	Name   string  `json:"name"`
	Line   int     `json:"line"`
	Col    int     `json:"col"`
	Detail string  `json:"detail"`
	// An outputs line.
	Outputs   []result.Output `json:"outputs"`
	Truncated bool            `json:"truncated"`
}

// ParseReport reads a report to EOF. Bad lines are counted in Malformed
// and skipped; the error is only for a failed read, and comes with what was
// parsed before it. An outputs line may be as long as MaxOutputBytesCeiling
// allows: the caller bounds what it hands over (the supervisor keeps a
// bounded copy of the pipe).
func ParseReport(r io.Reader) (Report, error) {
	var rep Report
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, tooLong, err := readLine(br, lineLimit(MaxOutputBytesCeiling))
		if len(line) > 0 || tooLong {
			rep.add(line, tooLong)
		}
		if errors.Is(err, io.EOF) {
			return rep, nil
		}
		if err != nil {
			return rep, fmt.Errorf("read runner report: %w", err)
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// limit is consumed and reported as tooLong.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			tooLong, line = true, nil
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

func (rep *Report) add(line []byte, tooLong bool) {
	var w wireLine
	if tooLong || json.Unmarshal(line, &w) != nil {
		rep.malformed()
		return
	}
	if w.Static != nil {
		if rep.Static != "" || !validStatic(*w.Static) {
			rep.malformed()
			return
		}
		rep.Static = *w.Static
		switch rep.Static {
		case StaticViolations:
			rep.Count = w.Count
		case StaticSyntaxError:
			rep.SyntaxLine, rep.SyntaxCol, rep.SyntaxDetail = w.Line, w.Col, w.Detail
		}
		return
	}
	if w.Kind == "ready" && !rep.Ready && rep.Static == "" && len(rep.Violations) == 0 {
		rep.Ready = true
		return
	}
	if w.Kind == "outputs" && validOutputs(w.Outputs) {
		rep.Outputs, rep.OutputsTruncated = w.Outputs, w.Truncated
		return
	}
	switch {
	case len(line) > maxLine:
		rep.malformed()
		return
	case w.Kind == KindImport, w.Kind == KindBuiltin, w.Kind == KindEvent, w.Kind == KindAttribute, w.Kind == KindNetwork, w.Kind == KindConstruct:
	default:
		rep.malformed()
		return
	}
	rep.Violations = append(rep.Violations, Violation{
		Kind: w.Kind, Name: w.Name, Line: w.Line, Col: w.Col, Detail: w.Detail,
		Runtime: rep.Static != "",
	})
}

// malformed counts a skipped line; the first after the status line is
// recorded as a runtime violation (ForgedLine).
func (rep *Report) malformed() {
	rep.Malformed++
	if rep.Static == "" {
		return
	}
	for _, v := range rep.Violations {
		if v.Runtime && v.Kind == KindEvent && v.Name == ForgedLine {
			return
		}
	}
	rep.Violations = append(rep.Violations, Violation{Kind: KindEvent, Name: ForgedLine,
		Detail: forgedDetail, Runtime: true})
}

// forgedDetail is the Detail of a ForgedLine violation.
const forgedDetail = "a line on the report channel that the runner did not write: the program wrote to it"

func validStatic(s string) bool {
	return s == StaticOK || s == StaticViolations || s == StaticSyntaxError
}

// StaticViolations returns the violations found before the program ran.
func (rep Report) StaticViolations() []Violation { return rep.filter(false) }

// RuntimeViolations returns the violations reported while it ran.
func (rep Report) RuntimeViolations() []Violation { return rep.filter(true) }

func (rep Report) filter(runtime bool) []Violation {
	var out []Violation
	for _, v := range rep.Violations {
		if v.Runtime == runtime {
			out = append(out, v)
		}
	}
	return out
}
