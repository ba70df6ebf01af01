package pyrunner

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/nsbox/nsbox/sandbox/result"
)

// The statuses of Cell.Status, as the runner reports them. The supervisor
// decides the statuses it alone can see (timeout, memory_limit, killed);
// these are the program's word and rank below them.
const (
	CellOK              = "ok"               // the cell ran to its end, or SystemExit(0)
	CellError           = "error"            // an uncaught exception, or SystemExit with a non-zero code
	CellInterrupted     = "interrupted"      // KeyboardInterrupt (SIGINT) ended the cell
	CellPolicyViolation = "policy_violation" // the static check found violations: nothing of the cell ran
	CellSyntaxError     = "syntax_error"     // the cell does not compile: nothing of it ran
)

// MaxCellBytes bounds one cell's source in a frame (EncodeCell), and a
// run's program in its frame (EncodeProgram). The runner refuses a larger
// frame as malformed.
const MaxCellBytes = 64 << 20

// maxExceptionField bounds each field of a cell's exception in the report,
// in encoded bytes; the runner's copy (EXCEPTION_MAX) is kept equal by a
// test.
const maxExceptionField = 64 << 10

// lineSlack is what a line carrying outputs may hold besides the outputs'
// data: the exception's three fields and the line's own keys.
const lineSlack = 4*maxExceptionField + 64<<10

// lineLimit bounds a report line that may carry outputs capped at max.
func lineLimit(max int64) int { return int(max) + lineSlack }

// MaxLine is the longest report line the runner writes under c: a
// reader of the report must allow this much for one line.
func (c Config) MaxLine() int {
	if c.Outputs || c.Mode == ModeSession {
		return lineLimit(c.maxOutputBytes())
	}
	return maxLine
}

// EncodeCell returns the frame that hands cell n, src, to a runner in
// ModeSession on its stdin: the ASCII header "CELL <n> <length>\n", then
// exactly length bytes of source (UTF-8, or with a coding cookie, as a
// file would be). n is the caller's cell number, echoed in the cell's
// events. src must be at most MaxCellBytes (the runner stops on a larger
// frame, as on any malformed one).
func EncodeCell(n int, src []byte) []byte {
	h := "CELL " + strconv.Itoa(n) + " " + strconv.Itoa(len(src)) + "\n"
	return append([]byte(h), src...)
}

// EncodeProgram returns the frame that hands a run's program, src, to a
// runner in ModeRun or ModeCheck on its stdin: the ASCII header
// "PROGRAM <length>\n", then exactly length bytes of source. The runner
// reads exactly the frame; whatever the caller writes after it, up to its
// end of input, is the program's standard input. src must be at most
// MaxCellBytes.
func EncodeProgram(src []byte) []byte {
	h := "PROGRAM " + strconv.Itoa(len(src)) + "\n"
	return append([]byte(h), src...)
}

// Event is one event of a session's report (SessionReader.Next): Ready,
// CellStart, Violation, Static or Cell.
type Event interface{ event() }

// Ready: the runner has armed its guard and waits for the first cell.
type Ready struct{}

// CellStart: the runner has read cell N and starts checking it.
type CellStart struct{ N int }

// Static is the status line of a cell's static check: Status is StaticOK,
// StaticViolations (Count of them, which can exceed the violation lines
// written) or StaticSyntaxError (with its place and detail).
type Static struct {
	Status    string
	Count     int
	Line, Col int
	Detail    string
}

// Cell: cell N is over. Everything the runner wrote on stdout and stderr
// for the cell was written before this event.
type Cell struct {
	N      int
	Status string // one of the Cell* statuses
	// ExitCode is SystemExit's code when it ended the cell (0 with
	// CellOK; nil when no SystemExit).
	ExitCode         *int
	Outputs          []result.Output
	OutputsTruncated bool
	Exception        *result.Exception // with CellError from an exception
}

func (Ready) event()     {}
func (CellStart) event() {}
func (Static) event()    {}
func (Cell) event()      {}
func (Violation) event() {}

// SessionReader reads a session-mode runner's report as it comes, one
// event at a time. Lines the runner cannot have written (not JSON, an
// unknown kind, too long, a status line out of place) are skipped and
// counted in Malformed: a program allowed os can write the report fd, so
// every event is the program's word (doc.go, Limits). The first such line
// while a cell runs (after its static status line, before its cell line)
// is also a runtime violation of that cell (ForgedLine), as in a run.
type SessionReader struct {
	br        *bufio.Reader
	limit     int
	malformed int
	cell      int  // the cell started last; -1 before any
	static    bool // its static status line came
	done      bool // its cell line came
	forged    bool // its ForgedLine violation was returned
}

// NewSessionReader reads the report r of a runner started with a Config
// whose MaxOutputBytes is maxOutputBytes (0: DefaultMaxOutputBytes); it
// bounds the longest line it holds.
func NewSessionReader(r io.Reader, maxOutputBytes int64) *SessionReader {
	if maxOutputBytes <= 0 {
		maxOutputBytes = DefaultMaxOutputBytes
	}
	return &SessionReader{br: bufio.NewReaderSize(r, 64<<10), limit: lineLimit(maxOutputBytes), cell: -1}
}

// Malformed is the number of lines skipped so far.
func (s *SessionReader) Malformed() int { return s.malformed }

// Next returns the next event. At the end of the report it returns
// io.EOF; any other error is a failed read.
func (s *SessionReader) Next() (Event, error) {
	for {
		line, tooLong, err := readLine(s.br, s.limit)
		if len(line) > 0 || tooLong {
			if ev := s.parse(line, tooLong); ev != nil {
				return ev, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if err != nil {
			return nil, fmt.Errorf("read runner report: %w", err)
		}
	}
}

// sessionLine is any line of a session's report.
type sessionLine struct {
	wireLine
	N         *int              `json:"n"`
	Status    string            `json:"status"`
	ExitCode  *int              `json:"exit_code"`
	Outputs   []result.Output   `json:"outputs"`
	Truncated bool              `json:"truncated"`
	Exception *result.Exception `json:"exception"`
}

// parse turns a line into its event, or nil (counted) for a bad one;
// the first bad one while a cell runs is that cell's ForgedLine
// violation.
func (s *SessionReader) parse(line []byte, tooLong bool) Event {
	var w sessionLine
	var ev Event
	if !tooLong && json.Unmarshal(line, &w) == nil {
		ev = s.event(w, len(line))
	}
	if ev != nil {
		return ev
	}
	s.malformed++
	if s.cell >= 0 && s.static && !s.done && !s.forged {
		s.forged = true
		return Violation{Kind: KindEvent, Name: ForgedLine, Detail: forgedDetail, Runtime: true}
	}
	return nil
}

func (s *SessionReader) event(w sessionLine, size int) Event {
	inCell := s.cell >= 0 && !s.done
	if w.Static != nil {
		if !inCell || s.static || !validStatic(*w.Static) {
			return nil
		}
		s.static = true
		st := Static{Status: *w.Static}
		switch st.Status {
		case StaticViolations:
			st.Count = w.Count
		case StaticSyntaxError:
			st.Line, st.Col, st.Detail = w.Line, w.Col, w.Detail
		}
		return st
	}
	switch w.Kind {
	case "ready":
		return Ready{}
	case "cell-start":
		if w.N == nil || inCell {
			return nil
		}
		s.cell, s.static, s.done, s.forged = *w.N, false, false, false
		return CellStart{N: *w.N}
	case "cell":
		if w.N == nil || !inCell || *w.N != s.cell || !validCell(w.Status) || !validOutputs(w.Outputs) {
			return nil
		}
		s.done = true
		return Cell{N: *w.N, Status: w.Status, ExitCode: w.ExitCode, Outputs: w.Outputs,
			OutputsTruncated: w.Truncated, Exception: w.Exception}
	case KindImport, KindBuiltin, KindEvent, KindAttribute, KindNetwork, KindConstruct:
		if !inCell || size > maxLine {
			return nil
		}
		return Violation{Kind: w.Kind, Name: w.Name, Line: w.Line, Col: w.Col, Detail: w.Detail, Runtime: s.static}
	}
	return nil
}

func validCell(s string) bool {
	switch s {
	case CellOK, CellError, CellInterrupted, CellPolicyViolation, CellSyntaxError:
		return true
	}
	return false
}

// validOutputs reports whether every output has a known type, and every
// image valid base64.
func validOutputs(outs []result.Output) bool {
	for _, o := range outs {
		switch o.Type {
		case result.OutputText, result.OutputHTML:
		case result.OutputPNG:
			if _, err := base64.StdEncoding.DecodeString(o.Data); err != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}
