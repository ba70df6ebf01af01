package supervisor

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
)

// TestCellClassify: a cell's status from the runner's word and what the
// supervisor did; the supervisor's verdicts outrank the runner's, except
// for a cell that finished before its interrupt arrived.
func TestCellClassify(t *testing.T) {
	three := 3
	runtime := []pyrunner.Violation{{Kind: pyrunner.KindImport, Name: "socket", Runtime: true}}
	static := []pyrunner.Violation{{Kind: pyrunner.KindImport, Name: "socket"}}
	for _, tc := range []struct {
		name   string
		c      cellRun
		status result.Status
		exit   string // "" for null
		signal string
		reason string // a part of it
	}{
		{"ok", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellOK}}, result.StatusOK, "0", "", ""},
		{"exit 3", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellError, ExitCode: &three}}, result.StatusError, "3", "", ""},
		{"exception", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellError}}, result.StatusError, "1", "", ""},
		{"refused then failed", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellError}, violations: runtime}, result.StatusPolicyViolation, "1", "", "refused"},
		{"static", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellPolicyViolation}, violations: static}, result.StatusPolicyViolation, "", "", "nothing of the cell ran"},
		{"syntax", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellSyntaxError}, static: &pyrunner.Static{Status: pyrunner.StaticSyntaxError, Line: 2, Detail: "invalid syntax"}}, result.StatusError, "1", "", "line 2"},
		{"KeyboardInterrupt of its own", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellInterrupted}}, result.StatusError, "", "2", ""},
		{"caller's interrupt", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellInterrupted}, interrupted: true}, result.StatusKilled, "", "2", "caller"},
		{"timeout", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellInterrupted}, timedOut: true, interrupted: true}, result.StatusTimeout, "", "2", "session lives"},
		{"timeout, caught", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellError}, timedOut: true}, result.StatusTimeout, "1", "", "session lives"},
		{"done just before the timeout", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellOK}, timedOut: true}, result.StatusOK, "0", "", ""},
		{"cancelled", cellRun{cell: &pyrunner.Cell{Status: pyrunner.CellInterrupted}, cancelled: errors.New("client gone"), interrupted: true}, result.StatusKilled, "", "2", "client gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := result.New("x", "p")
			for _, v := range tc.c.violations {
				r.Violations = append(r.Violations, result.Violation{Kind: v.Kind, Name: v.Name})
			}
			tc.c.classify(r)
			if r.Status != tc.status || ptrString(r.ExitCode) != tc.exit || ptrString(r.Signal) != tc.signal || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("status %s exit %q signal %q reason %q; want %s %q %q ...%s...",
					r.Status, ptrString(r.ExitCode), ptrString(r.Signal), r.Reason, tc.status, tc.exit, tc.signal, tc.reason)
			}
			if r.Status == result.StatusTimeout && r.Limit != result.LimitWallTime {
				t.Errorf("timeout without its limit: %q", r.Limit)
			}
		})
	}
}

func ptrString(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}
