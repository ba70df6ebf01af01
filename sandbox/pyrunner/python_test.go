package pyrunner

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestPythonUnit runs the runner's plain-Python unit tests (runner/tests:
// the static check, and the bundle against its modules) with the host's
// interpreter, outside any sandbox, and fails with unittest's output.
func TestPythonUnit(t *testing.T) {
	requirePython(t)
	// -I: nothing from the environment or the user's site; -B: no
	// __pycache__ in the source tree; -t .: the package is runner.
	cmd := exec.Command(python, "-I", "-B", "-m", "unittest", "discover", "-s", "runner/tests", "-t", ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	m := regexp.MustCompile(`(?m)^Ran (\d+) tests? in .*\n\nOK$`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" || strings.Contains(string(out), "skipped") {
		t.Errorf("want some tests run, none skipped:\n%s", out)
	}
}
