package pyrunner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/sandbox/pyrunner/runnerlibs"
)

var extracted struct {
	once sync.Once
	dir  string
	err  error
}

// restrictedLib returns RestrictedPython extracted from the vendored
// wheel, as a root has it in LibDir (uncompiled: the tests' interpreter
// compiles in memory).
func restrictedLib(t *testing.T) string {
	t.Helper()
	extracted.once.Do(func() {
		extracted.dir = filepath.Join(testDir, "lib")
		extracted.err = runnerlibs.Extract(extracted.dir)
	})
	if extracted.err != nil {
		t.Fatal(extracted.err)
	}
	return extracted.dir
}

// restrictedConfig is strictConfig in restricted mode.
func restrictedConfig(t *testing.T) Config {
	c := strictConfig()
	c.PythonMode = PythonRestricted
	c.RestrictedLib = restrictedLib(t)
	return c
}

// TestRestrictedOrdinaryPrograms: ordinary programs (testdata/restricted/ok,
// each NAME.py with the output plain python3.11 gives, NAME.out) run under
// strict in restricted mode, end ok and print exactly that.
func TestRestrictedOrdinaryPrograms(t *testing.T) {
	progs, err := filepath.Glob("testdata/restricted/ok/*.py")
	if err != nil {
		t.Fatal(err)
	}
	if len(progs) < 30 {
		t.Fatalf("%d programs in testdata/restricted/ok, want at least 30", len(progs))
	}
	cfg := restrictedConfig(t)
	for _, p := range progs {
		name := strings.TrimSuffix(filepath.Base(p), ".py")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(p, ".py") + ".out")
			if err != nil {
				t.Fatal(err)
			}
			r := runProgram(t, cfg, string(src), "")
			if r.exit != 0 || r.report.Static != StaticOK || len(r.report.Violations) != 0 {
				t.Fatalf("exit %d, static %q, %d violations; want 0, ok, none\n%s",
					r.exit, r.report.Static, len(r.report.Violations), r)
			}
			if r.stdout != string(want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want)
			}
		})
	}
}

// TestRestrictedSession: a session's cells are compiled one by one by the
// restricted compiler; state persists across cells, a refused cell is a
// policy violation and the session goes on; the display rule holds.
func TestRestrictedSession(t *testing.T) {
	cfg := restrictedConfig(t)
	cfg.Outputs = true
	s := startSession(t, cfg, "")
	wantStatus(t, s.run("class P:\n    def __init__(self, x):\n        self.x = x\np = P(2)\nprint('one')\n"), CellOK)
	c := s.run("p.x += 40\nfor k, v in {'a': p.x}.items():\n    print(k, v)\n")
	wantStatus(t, c, CellOK)
	if c.stdout != "a 42\n" {
		t.Errorf("cell 2 stdout %q", c.stdout)
	}
	c = s.run("().__class__.__base__.__subclasses__()\n")
	wantStatus(t, c, CellPolicyViolation)
	c = s.run("s = 'x'\n'{0.__class__.__base__}'.format(s)\n")
	if c.Status == CellOK || len(c.violations) == 0 {
		t.Errorf("format route in a cell: %s", c)
	}
	// A construct refused before the cell runs reaches the cell's
	// violations through the session's reader, by its kind.
	c = s.run("match p:\n    case _:\n        pass\n")
	wantStatus(t, c, CellPolicyViolation)
	if !slices.ContainsFunc(c.violations, func(v Violation) bool { return v.Kind == KindConstruct && v.Name == "match" }) {
		t.Errorf("match in a cell: violations %+v", c.violations)
	}
	c = s.run("p.x * 2")
	wantStatus(t, c, CellOK)
	if len(c.Outputs) != 1 || c.Outputs[0].Data != "84" {
		t.Errorf("outputs %+v", c.Outputs)
	}
	if code := s.close(); code != 0 {
		t.Errorf("exit %d after stdin closed\n%s", code, s.output())
	}
}

// TestRestrictedWithoutLibrary: restricted mode on a root without the
// runner's RestrictedPython (one built by an older nsbox) fails closed:
// nothing runs, and the error says to rebuild the root.
func TestRestrictedWithoutLibrary(t *testing.T) {
	cfg := restrictedConfig(t)
	cfg.RestrictedLib = t.TempDir()
	dir := t.TempDir()
	r := runProgram(t, cfg, "open('ran', 'w').close()\n", dir)
	if r.exit != ExitRunnerError || !strings.Contains(r.stderr, "RestrictedPython") ||
		!strings.Contains(r.stderr, "rebuild it") || r.report.Static != "" {
		t.Fatalf("exit %d, static %q; want %d, no status line and a rebuild hint\n%s", r.exit, r.report.Static, ExitRunnerError, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the program ran")
	}
}
