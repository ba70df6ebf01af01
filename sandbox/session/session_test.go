package session

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// TestCheck: options a session cannot run with are refused before
// anything is created.
func TestCheck(t *testing.T) {
	session := &plan.Plan{Runner: pyrunner.Config{Mode: pyrunner.ModeSession}}
	run := &plan.Plan{Runner: pyrunner.Config{Mode: pyrunner.ModeRun}}
	many := map[string]string{}
	for i := range audit.MaxLabels - 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		o    Options
		want string // "" for accepted
	}{
		{Options{Plan: session}, ""},
		{Options{Plan: session, Labels: map[string]string{"team": "a"}}, ""},
		{Options{}, "no plan"},
		{Options{Plan: run}, `mode "run"`},
		{Options{Plan: session, Labels: map[string]string{"session": "x"}}, "session's own"},
		{Options{Plan: session, Labels: map[string]string{"cell": "1"}}, "session's own"},
		{Options{Plan: session, Labels: many}, "labels"},
		{Options{Plan: session, IdleTimeout: -1}, "negative"},
	} {
		err := check(tc.o)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("check(%+v) = %v; want %q", tc.o, err, tc.want)
		}
	}
}
