package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/result"
)

// TestDatasciMinPolicy: the leaner root and its policy run a pandas
// program; seaborn is not installed there, and the refusal says so.
func TestDatasciMinPolicy(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat(filepath.Join(rootsDir(), "datasci-min", ".nsbox")); err != nil {
		mustwork.Skip(t, "datasci-min root not built (make datasci-min): %v", err)
	}
	o := runPyLayer(t, "datasci-min", "import numpy as np, pandas as pd\nprint(pd.DataFrame({'a': np.arange(3)})['a'].sum())\n")
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "3\n" || len(o.res.Violations) != 0 {
		t.Errorf("stdout %q, violations %+v", o.res.Stdout, o.res.Violations)
	}
	o = runPyLayer(t, "datasci-min", "import seaborn\n")
	o.wantStatus(t, result.StatusPolicyViolation)
	if len(o.res.Violations) != 1 || !strings.Contains(o.res.Violations[0].Detail, "no module 'seaborn' is installed in this root") {
		t.Errorf("datasci-min, import seaborn: %+v", o.res.Violations)
	}
}
