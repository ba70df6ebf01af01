package pyrunner

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseReport(t *testing.T) {
	in := `{"kind":"import","name":"os","line":1,"col":7,"detail":"import of 'os' is not allowed"}
not json at all
{"kind":"teleport","name":"x","line":1,"col":0,"detail":"?"}

{"static":"violations","count":3}
{"kind":"event","name":"os.system","line":4,"col":0,"detail":"denied","extra":true}
{"static":"ok"}
{"static":"maybe"}
{"kind":"attribute","name":"gi_frame","line":9,"col":2,"detail":"frames"}`
	rep, err := ParseReport(strings.NewReader(in)) // no final newline: killed mid-run
	if err != nil {
		t.Fatal(err)
	}
	want := Report{
		Static: StaticViolations,
		Count:  3,
		Violations: []Violation{
			{Kind: KindImport, Name: "os", Line: 1, Col: 7, Detail: "import of 'os' is not allowed"},
			{Kind: KindEvent, Name: "os.system", Line: 4, Detail: "denied", Runtime: true},
			{Kind: KindEvent, Name: ForgedLine, Runtime: true,
				Detail: "a line on the report channel that the runner did not write: the program wrote to it"},
			{Kind: KindAttribute, Name: "gi_frame", Line: 9, Col: 2, Detail: "frames", Runtime: true},
		},
		// garbage, an unknown kind, a second status line, an unknown status
		Malformed: 4,
	}
	if !reflect.DeepEqual(rep, want) {
		t.Errorf("got  %+v\nwant %+v", rep, want)
	}
	if s, r := rep.StaticViolations(), rep.RuntimeViolations(); len(s) != 1 || len(r) != 3 {
		t.Errorf("static %v runtime %v", s, r)
	}
}

func TestParseReportSyntaxError(t *testing.T) {
	rep, err := ParseReport(strings.NewReader(
		`{"static":"syntax_error","line":3,"col":4,"detail":"SyntaxError: '(' was never closed"}` + "\n"))
	if err != nil || rep.Static != StaticSyntaxError || rep.SyntaxLine != 3 || rep.SyntaxCol != 4 ||
		rep.SyntaxDetail != "SyntaxError: '(' was never closed" {
		t.Errorf("%+v, %v", rep, err)
	}
}

func TestParseReportEdges(t *testing.T) {
	// Nothing at all: the runner never started.
	if rep, err := ParseReport(strings.NewReader("")); err != nil || rep.Static != "" || rep.Malformed != 0 {
		t.Errorf("empty: %+v, %v", rep, err)
	}
	// An over-long line is skipped whole, and the next one still parses.
	long := `{"kind":"import","name":"` + strings.Repeat("x", maxLine) + `"}` + "\n{\"static\":\"ok\"}\n"
	if rep, err := ParseReport(strings.NewReader(long)); err != nil || rep.Malformed != 1 || rep.Static != StaticOK {
		t.Errorf("long line: %+v, %v", rep, err)
	}
	// One byte at a time makes no difference.
	rep, err := ParseReport(iotest.OneByteReader(strings.NewReader(
		"{\"static\":\"ok\"}\n{\"kind\":\"builtin\",\"name\":\"eval\",\"line\":2,\"col\":0,\"detail\":\"d\"}\n")))
	if err != nil || rep.Static != StaticOK || len(rep.RuntimeViolations()) != 1 {
		t.Errorf("one byte reader: %+v, %v", rep, err)
	}
	// A read error comes back with what was parsed before it.
	boom := errors.New("boom")
	rep, err = ParseReport(io.MultiReader(strings.NewReader("{\"static\":\"ok\"}\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || rep.Static != StaticOK {
		t.Errorf("read error: %+v, %v", rep, err)
	}
}

// TestParseRealReport parses what the runner itself writes.
func TestParseRealReport(t *testing.T) {
	r := runProgram(t, strictConfig(), "import os\nx = 1 .__class__\n", "")
	if r.report.Static != StaticViolations || r.report.Count != 2 || len(r.report.Violations) != 2 ||
		r.report.Violations[1] != (Violation{Kind: KindAttribute, Name: "__class__", Line: 2, Col: 7,
			Detail: "attribute '__class__' starts with an underscore: not allowed under strict_attrs"}) {
		t.Errorf("%+v\n%s", r.report, r)
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add([]byte("{\"static\":\"ok\"}\n{\"kind\":\"import\",\"name\":\"os\",\"line\":1,\"col\":0,\"detail\":\"d\"}\n"))
	f.Add([]byte("{\"static\":\"syntax_error\",\"line\":1}\n\x00\xff{\n"))
	f.Add([]byte("{\"static\":\"violations\",\"count\":-1}\n{\"kind\":null}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := ParseReport(strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("error from an in-memory reader: %v", err)
		}
		lines := strings.Count(string(b), "\n") + 1
		if len(rep.Violations) > lines || rep.Malformed > lines {
			t.Fatalf("%d violations and %d malformed from %d lines", len(rep.Violations), rep.Malformed, lines)
		}
		if rep.Static != "" && !validStatic(rep.Static) {
			t.Fatalf("status %q", rep.Static)
		}
	})
}

// TestParseReportReady checks that only the first line can be the ready
// line: the program, which can write to the pipe only after the status
// line, cannot forge one.
func TestParseReportReady(t *testing.T) {
	rep, err := ParseReport(strings.NewReader("{\"kind\":\"ready\"}\n{\"static\":\"ok\"}\n{\"kind\":\"ready\"}\n"))
	if err != nil || !rep.Ready || rep.Static != StaticOK || rep.Malformed != 1 {
		t.Errorf("ready first, then a forged one: %+v, %v", rep, err)
	}
	rep, err = ParseReport(strings.NewReader("{\"static\":\"ok\"}\n{\"kind\":\"ready\"}\n"))
	if err != nil || rep.Ready || rep.Malformed != 1 {
		t.Errorf("ready after the status line: %+v, %v", rep, err)
	}
}

// TestParseReportForged checks that a program writing to the report
// channel is recorded, not just skipped: a part line glued to the
// runner's next one spoils both, and must not hide the runner's line.
func TestParseReportForged(t *testing.T) {
	in := "{\"static\":\"ok\"}\n{\"kind\":\"import\"," +
		"{\"kind\":\"event\",\"name\":\"os.fork\",\"line\":3,\"col\":0,\"detail\":\"denied\"}\nnot json\n"
	rep, err := ParseReport(strings.NewReader(in))
	if err != nil || rep.Malformed != 2 || len(rep.RuntimeViolations()) != 1 ||
		rep.RuntimeViolations()[0].Name != ForgedLine || rep.RuntimeViolations()[0].Kind != KindEvent {
		t.Errorf("%+v, %v", rep, err)
	}
	// Before the status line only the runner writes: nothing forged.
	rep, err = ParseReport(strings.NewReader("not json\n{\"static\":\"ok\"}\n"))
	if err != nil || rep.Malformed != 1 || len(rep.Violations) != 0 {
		t.Errorf("before the status line: %+v, %v", rep, err)
	}
}
