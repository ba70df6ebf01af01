package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
)

// TestUserWorkspace: a directory of a regular user is idmapped to the
// program's uid; one owned by root is never idmapped and works only when
// writable by others; the errors name the directory and the reason.
func TestUserWorkspace(t *testing.T) {
	mustwork.NeedRoot(t) // chowns test directories, makes mounts
	ids := testIDs(t)
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
	const user = 2_000_001_000 // the sandbox uid before ids were per run
	for _, tc := range []struct {
		path  string
		owner uint32 // the directory's owner as seen through the mount
		want  string // "" for ok
	}{
		{mk("user", 0o700, user), ids.Sandbox, ""},
		{mk("userworld", 0o777, 1234), ids.Sandbox, ""},
		{mk("world", 0o777, 0), 0, ""},
		{mk("rootonly", 0o755, 0), 0, "owned by root (0:0), whose files a sandbox never gets; and it is not writable by others (mode 0755)"},
		{mk("userro", 0o500, user), 0, "not writable by its owner (uid 2000001000, mode 0500)"},
		{filepath.Join(dir, "missing"), 0, "no such file"},
		{file, 0, "not a directory"},
	} {
		mnt, err := userWorkspace(tc.path, ids)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("userWorkspace(%s) = %v, want %q", tc.path, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), tc.path) {
			t.Errorf("error %q does not name the path", err)
		}
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(mnt.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != tc.owner || st.Gid != tc.owner {
			t.Errorf("%s: owner through the mount %d:%d, want %d", tc.path, st.Uid, st.Gid, tc.owner)
		}
		mnt.Close()
	}
}

// TestUserWorkspaceNoIdmap: on a filesystem that cannot be idmapped
// (ramfs), a user's directory falls back to the old rule with an error
// that says why. The ramfs is mounted in a mount namespace of this test's
// own thread, which dies with it.
func TestUserWorkspaceNoIdmap(t *testing.T) {
	mustwork.NeedRoot(t)
	ids := testIDs(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread has its own mounts
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make / private: %v", err)
			return
		}
		dir := t.TempDir()
		if err := unix.Mount("ramfs", dir, "ramfs", 0, ""); err != nil {
			t.Errorf("mount ramfs: %v", err)
			return
		}
		for _, tc := range []struct {
			mode os.FileMode
			want string
		}{
			{0o700, "cannot be mapped to the sandbox user: idmapped mounts unsupported: the 0x858458f6 filesystem cannot be idmapped here"},
			{0o777, ""},
		} {
			p := filepath.Join(dir, fmt.Sprintf("ws%o", tc.mode))
			if err := os.Mkdir(p, tc.mode); err != nil {
				t.Error(err)
				return
			}
			os.Chmod(p, tc.mode)
			os.Chown(p, 1234, 1234)
			mnt, err := userWorkspace(p, ids)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("mode %o: %v, want %q", tc.mode, err, tc.want)
			}
			if mnt != nil {
				mnt.Close()
			}
		}
	}()
	<-done
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
	outs := []result.Output{{Type: result.OutputText, Data: "42"}}
	r := &result.Result{Status: result.StatusOK, ExitCode: &zero}
	applyReport(r, pyrunner.Report{Static: pyrunner.StaticOK, Outputs: outs, OutputsTruncated: true})
	if !reflect.DeepEqual(r.Outputs, outs) || !r.OutputsTruncated {
		t.Errorf("outputs %+v truncated %v, want the report's", r.Outputs, r.OutputsTruncated)
	}
	if c := reportCap(pyrunner.Config{}); c != maxReport {
		t.Errorf("report cap without outputs %d, want %d", c, maxReport)
	}
	if c := reportCap(pyrunner.Config{Outputs: true, MaxOutputBytes: 8 << 20}); c < maxReport+8<<20 {
		t.Errorf("report cap with 8 MiB of outputs %d: a whole outputs line must fit", c)
	}
	runnerBug := pyrunner.ExitRunnerError
	if err := runnerFailed(&result.Result{ExitCode: &runnerBug, Stderr: "bad config"}, pyrunner.Report{}); err == nil || !strings.Contains(err.Error(), "bad config") {
		t.Errorf("runner exit 125 before its status line: %v, want a runner step error", err)
	}
	if err := runnerFailed(&result.Result{ExitCode: &runnerBug}, pyrunner.Report{Static: pyrunner.StaticOK}); err != nil {
		t.Errorf("a program that exits 125 itself is not a runner failure: %v", err)
	}
}
