package pyrunner

import (
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

func TestEncodeCell(t *testing.T) {
	got := string(EncodeCell(7, []byte("print('é')\n")))
	if want := "CELL 7 12\nprint('é')\n"; got != want {
		t.Errorf("EncodeCell = %q, want %q", got, want)
	}
	if got := string(EncodeCell(0, nil)); got != "CELL 0 0\n" {
		t.Errorf("empty cell = %q", got)
	}
}

// readAll returns every event of a session report and the reader.
func readAll(t *testing.T, in string, max int64) ([]Event, *SessionReader) {
	t.Helper()
	sr := NewSessionReader(strings.NewReader(in), max)
	var evs []Event
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return evs, sr
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

func TestSessionReader(t *testing.T) {
	in := `{"kind":"ready"}
{"kind":"cell","n":1,"status":"ok","outputs":[],"truncated":false}
{"kind":"cell-start","n":1}
{"kind":"import","name":"os","line":1,"col":0,"detail":"no"}
{"kind":"construct","name":"match","line":2,"col":0,"detail":"no match"}
{"static":"violations","count":2}
{"static":"ok"}
{"kind":"cell","n":2,"status":"ok","outputs":[],"truncated":false}
{"kind":"cell","n":1,"status":"policy_violation","outputs":[],"truncated":false}
{"kind":"cell","n":1,"status":"ok","outputs":[],"truncated":false}
{"kind":"cell-start","n":2}
{"static":"ok"}
{"kind":"event","name":"os.system","line":2,"col":0,"detail":"denied"}
{"kind":"cell","n":2,"status":"error","exit_code":3,"outputs":[{"type":"text/html","data":"<b>x</b>"},{"type":"text/plain","data":"x"},{"type":"image/png","data":"iVBORw=="}],"truncated":true,"exception":{"name":"SystemExit","value":"3","traceback":""}}
{"kind":"cell-start","n":3}
{"static":"syntax_error","line":1,"col":4,"detail":"SyntaxError: bad"}
{"kind":"cell","n":3,"status":"syntax_error","outputs":[{"type":"image/png","data":"not base64!"}],"truncated":false}
{"kind":"cell","n":3,"status":"bogus","outputs":[],"truncated":false}
{"kind":"cell","n":3,"status":"syntax_error","outputs":[{"type":"text/x-evil","data":""}],"truncated":false}
{"kind":"cell","n":3,"status":"syntax_error","outputs":[],"truncated":false}
`
	evs, sr := readAll(t, in, 0)
	three := 3
	// The first line of a running cell's (after its status line) that
	// the runner cannot have written is that cell's violation, once.
	forged := Violation{Kind: KindEvent, Name: ForgedLine, Detail: forgedDetail, Runtime: true}
	want := []Event{
		Ready{},
		CellStart{N: 1},
		Violation{Kind: KindImport, Name: "os", Line: 1, Detail: "no"},
		Violation{Kind: KindConstruct, Name: "match", Line: 2, Detail: "no match"},
		Static{Status: StaticViolations, Count: 2},
		forged,
		Cell{N: 1, Status: CellPolicyViolation, Outputs: []result.Output{}},
		CellStart{N: 2},
		Static{Status: StaticOK},
		Violation{Kind: KindEvent, Name: "os.system", Line: 2, Detail: "denied", Runtime: true},
		Cell{N: 2, Status: CellError, ExitCode: &three, OutputsTruncated: true,
			Outputs: []result.Output{{Type: "text/html", Data: "<b>x</b>"}, {Type: "text/plain", Data: "x"},
				{Type: "image/png", Data: "iVBORw=="}},
			Exception: &result.Exception{Name: "SystemExit", Value: "3"}},
		CellStart{N: 3},
		Static{Status: StaticSyntaxError, Line: 1, Col: 4, Detail: "SyntaxError: bad"},
		forged,
		Cell{N: 3, Status: CellSyntaxError, Outputs: []result.Output{}},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events\n got %#v\nwant %#v", evs, want)
	}
	// A cell line before any cell, a second status line, a cell line for
	// another cell, a second cell line, bad base64, an unknown status, an
	// unknown output type (the second and the fifth are also the
	// ForgedLine violations of cells 1 and 3).
	if sr.Malformed() != 7 {
		t.Errorf("malformed %d, want 7", sr.Malformed())
	}
}

// TestSessionReaderBounds: a cell line may carry its outputs' cap and
// the slack, not more; other lines stay within maxLine.
func TestSessionReaderBounds(t *testing.T) {
	const max = 100 << 10
	cell := func(data int) string {
		return `{"kind":"cell","n":1,"status":"ok","outputs":[{"type":"text/plain","data":"` +
			strings.Repeat("x", data) + `"}],"truncated":false}` + "\n"
	}
	in := `{"kind":"cell-start","n":1}` + "\n" +
		`{"kind":"import","name":"` + strings.Repeat("y", maxLine) + `","line":1,"col":0,"detail":""}` + "\n" +
		cell(max+lineSlack) + cell(max)
	evs, sr := readAll(t, in, max)
	if len(evs) != 2 || sr.Malformed() != 2 {
		t.Fatalf("%d events, %d malformed; want 2 and 2", len(evs), sr.Malformed())
	}
	if c, ok := evs[1].(Cell); !ok || len(c.Outputs[0].Data) != max {
		t.Errorf("event %#v", evs[1])
	}
}

func TestParseReportOutputs(t *testing.T) {
	in := `{"static":"ok"}
{"kind":"outputs","outputs":[{"type":"text/plain","data":"forged"}],"truncated":false}
{"kind":"outputs","outputs":[{"type":"application/evil","data":""}],"truncated":false}
{"kind":"outputs","outputs":[{"type":"text/plain","data":"` + strings.Repeat("1", 2*maxLine) + `"}],"truncated":true}
`
	rep, err := ParseReport(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outputs) != 1 || len(rep.Outputs[0].Data) != 2*maxLine || !rep.OutputsTruncated || rep.Malformed != 1 {
		t.Errorf("outputs %d, truncated %v, malformed %d", len(rep.Outputs), rep.OutputsTruncated, rep.Malformed)
	}
}

// TestExceptionMaxMirrored: the runner clips each field of a cell's
// exception to the size the reader's line bound allows for it.
func TestExceptionMaxMirrored(t *testing.T) {
	m := regexp.MustCompile(`(?m)^EXCEPTION_MAX = (\d+) << (\d+)\b`).FindAllStringSubmatch(Source, -1)
	if len(m) != 1 {
		t.Fatalf("want one EXCEPTION_MAX assignment in the runner, found %d", len(m))
	}
	v, _ := strconv.Atoi(m[0][1])
	sh, _ := strconv.Atoi(m[0][2])
	if v<<sh != maxExceptionField {
		t.Errorf("runner's EXCEPTION_MAX is %d, maxExceptionField is %d", v<<sh, maxExceptionField)
	}
}
