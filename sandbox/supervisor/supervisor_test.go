package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
)

func TestCheckWorkspace(t *testing.T) {
	mustwork.NeedRoot(t) // chowns test directories
	dir := t.TempDir()
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode) // umask-free
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o666)
	sandbox := spec.HostIDBase + spec.SandboxID
	for _, tc := range []struct {
		path string
		ok   bool
		want string
	}{
		{mk("owned", 0o700, sandbox), true, ""},
		{mk("world", 0o777, 0), true, ""},
		{mk("rootonly", 0o755, 0), false, "not writable by the sandbox user"},
		{mk("ownedro", 0o500, sandbox), false, "not writable"},
		{filepath.Join(dir, "missing"), false, "no such file"},
		{file, false, "not a directory"},
	} {
		err := checkWorkspace(tc.path)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkWorkspace(%s) = %v, want ok=%v containing %q", tc.path, err, tc.ok, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), tc.path) {
			t.Errorf("error %q does not name the path", err)
		}
	}
}

// TestSweepStale: a run dir whose lock is free (crashed supervisor) is
// removed; a locked one (live run) is kept; a lock-less dir only once old.
func TestSweepStale(t *testing.T) {
	state := t.TempDir()
	live, err := newRunDir(state, "live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	crashed, err := newRunDir(state, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	crashed.lock.Close() // the supervisor died: its lock is released
	runs := filepath.Join(state, "runs")
	young := filepath.Join(runs, "young")
	old := filepath.Join(runs, "old")
	os.Mkdir(young, 0o700)
	os.Mkdir(old, 0o700)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(old, past, past)
	// A run being set up: its lock exists but is not held yet. The sweep
	// must not take it for a crashed run (it did, before .new- dirs).
	settingUp := filepath.Join(runs, newPrefix+"setup")
	os.Mkdir(settingUp, 0o700)
	os.WriteFile(filepath.Join(settingUp, "lock"), nil, 0o600)
	deadSetup := filepath.Join(runs, newPrefix+"dead")
	os.Mkdir(deadSetup, 0o700)
	os.Chtimes(deadSetup, past, past)

	sweepStale(runs)
	for name, want := range map[string]bool{"live": true, "crashed": false, "young": true, "old": false,
		newPrefix + "setup": true, newPrefix + "dead": false} {
		_, err := os.Stat(filepath.Join(runs, name))
		if exists := err == nil; exists != want {
			t.Errorf("%s: exists=%v after sweep, want %v", name, exists, want)
		}
	}
}

func TestNewIDUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewID()
		if len(id) != 24 || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}

// TestCgroupPrefix: runs of different state directories never sweep each
// other's cgroups, and the same directory always gives the same prefix.
func TestCgroupPrefix(t *testing.T) {
	a, b := cgroupPrefix("/var/lib/nsbox"), cgroupPrefix("/tmp/other")
	if a == b || a != cgroupPrefix("/var/lib/nsbox/") || len(a) != 10 || a[0] != 's' || a[9] != '-' {
		t.Errorf("prefixes %q and %q", a, b)
	}
}

// TestApplyReport: who ended the run, the program or the Python layer.
func TestApplyReport(t *testing.T) {
	one, zero, crash := 1, 0, 139
	rt := pyrunner.Violation{Kind: "event", Name: "os.system", Line: 3, Runtime: true}
	for _, tc := range []struct {
		name   string
		status result.Status
		exit   *int
		rep    pyrunner.Report
		want   result.Status
	}{
		{"static violations: nothing ran", result.StatusError, &one,
			pyrunner.Report{Static: pyrunner.StaticViolations, Violations: []pyrunner.Violation{{Kind: "import", Name: "os", Line: 1}}}, result.StatusPolicyViolation},
		{"uncaught refusal", result.StatusError, &one, pyrunner.Report{Static: pyrunner.StaticOK, Violations: []pyrunner.Violation{rt}}, result.StatusPolicyViolation},
		{"refusal caught, clean exit", result.StatusOK, &zero, pyrunner.Report{Static: pyrunner.StaticOK, Violations: []pyrunner.Violation{rt}}, result.StatusOK},
		{"refusal, then an unrelated crash", result.StatusError, &crash, pyrunner.Report{Static: pyrunner.StaticOK, Violations: []pyrunner.Violation{rt}}, result.StatusError},
		{"plain error", result.StatusError, &one, pyrunner.Report{Static: pyrunner.StaticOK}, result.StatusError},
	} {
		r := &result.Result{Status: tc.status, ExitCode: tc.exit}
		applyReport(r, tc.rep)
		if r.Status != tc.want || len(r.Violations) != len(tc.rep.Violations) {
			t.Errorf("%s: status %s with %d violations, want %s with %d", tc.name, r.Status, len(r.Violations), tc.want, len(tc.rep.Violations))
		}
	}
	runnerBug := pyrunner.ExitRunnerError
	if err := runnerFailed(&result.Result{ExitCode: &runnerBug, Stderr: "bad config"}, pyrunner.Report{}); err == nil || !strings.Contains(err.Error(), "bad config") {
		t.Errorf("runner exit 125 before its status line: %v, want a runner step error", err)
	}
	if err := runnerFailed(&result.Result{ExitCode: &runnerBug}, pyrunner.Report{Static: pyrunner.StaticOK}); err != nil {
		t.Errorf("a program that exits 125 itself is not a runner failure: %v", err)
	}
}
