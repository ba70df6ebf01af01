package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
)

// Warm sandboxes: a sandbox started before its program (the service's
// pool, a session) imports the policy's allowlist.preload while it waits.

// needDatasci skips a test without the datasci root (make datasci).
func needDatasci(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(rootsDir(), "datasci", ".nsbox")); err != nil {
		mustwork.Skip(t, "datasci root not built (make datasci): %v", err)
	}
}

// warmPlan makes a session's plan as the planner makes a warm sandbox's:
// the runner imports the policy's preload before the first cell.
func warmPlan(t *testing.T, policy string) func(*plan.Plan) {
	t.Helper()
	pol, err := policies.Resolve(policy)
	if err != nil {
		t.Fatal(err)
	}
	return func(pl *plan.Plan) { pl.Runner.Preload = pol.Allowlist.Preload }
}

// TestPreloadDoesNotWiden: a warm datasci session finds numpy, pandas
// and pyplot loaded before its first cell imports anything, and a module
// that preloading loaded along (pandas imports pickle) but the allowlist
// does not allow stays refused to the program, by the static check and
// at run time; a cold run ignores the preload.
func TestPreloadDoesNotWiden(t *testing.T) {
	needDatasci(t)
	e := newSessionEnv(t)
	s := e.open(t, "datasci", 0, warmPlan(t, "datasci"))
	r := cell(t, s, "import sys\nprint(sorted(m for m in ('matplotlib.pyplot', 'numpy', 'pandas', 'pickle') if m in sys.modules))", 0, result.StatusOK)
	if want := "['matplotlib.pyplot', 'numpy', 'pandas', 'pickle']\n"; r.Stdout != want {
		t.Fatalf("preloaded: %q, want %q", r.Stdout, want)
	}
	r = cell(t, s, "import pickle", 0, result.StatusPolicyViolation)
	if len(r.Violations) == 0 || !strings.Contains(r.Violations[0].Detail+r.Violations[0].Name, "pickle") {
		t.Errorf("import pickle: violations %+v", r.Violations)
	}
	r, err := s.Run(t.Context(), []byte("m = __import__('pick' + 'le')\nprint(m.dumps(1))"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status == result.StatusOK || strings.Contains(r.Stdout, "\\x80") || len(r.Violations) == 0 {
		t.Errorf("__import__ of a preloaded, refused module: status %q, stdout %q, violations %+v", r.Status, r.Stdout, r.Violations)
	}
	cell(t, s, "import pandas as pd\nprint(len(pd.DataFrame({'x': range(3)})))", 0, result.StatusOK)

	o := runPyLayer(t, "datasci", "import sys\nprint('pandas' in sys.modules)")
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "False\n" {
		t.Errorf("a cold run preloaded: %q", o.res.Stdout)
	}
	s.Close()
	e.noLeftovers(t)
}
