package tests

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestSandboxDiesWithSupervisor SIGKILLs nsbox itself mid-run: PDEATHSIG
// must take the sandbox down (no process of the sandbox uid survives), and
// the next run must sweep the crashed run's directory.
func TestSandboxDiesWithSupervisor(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	state := t.TempDir()
	nsbox(t, run{
		args:  []string{"run", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", escapeCode(true)},
		state: state,
		whileRuns: func(p *os.Process) {
			if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
				t.Errorf("payload never got ready")
			}
			p.Signal(syscall.SIGKILL)
		},
	})
	// The kernel delivers PDEATHSIG asynchronously: give it a moment.
	deadline := time.Now().Add(2 * time.Second)
	for len(sandboxProcesses(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	heartbeatsStopped(t, ws)

	runs, _ := os.ReadDir(filepath.Join(state, "runs"))
	if len(runs) != 1 {
		t.Fatalf("want the crashed run's directory left behind, found %d entries", len(runs))
	}
	o := nsbox(t, run{args: []string{"run", "--json", "-c", "pass"}, state: state})
	o.wantStatus(t, result.StatusOK)
	o.noLeftovers(t)
}

// TestNoInheritedDescriptors lists the program's open descriptors from
// inside (CVE-2024-21626: a leaked host fd is a way out of the root).
func TestNoInheritedDescriptors(t *testing.T) {
	needRoot(t)
	code := `
import os
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
print("FDS", fds)
print("FD6", os.readlink("/proc/self/fd/6"), oct(int(open("/proc/self/fdinfo/6").read().split("flags:")[1].split()[0], 8) & 3))
print("CWD", os.getcwd(), "LEADER", os.getsid(0) == os.getpid(), "PPID", os.getppid())
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	// 0-2 are stdio; 3 is the directory listdir itself holds open; 6 is
	// the runner's report pipe to the supervisor, write-only.
	if !strings.Contains(o.res.Stdout, "FDS [0, 1, 2, 3, 6]") {
		t.Errorf("unexpected descriptors inside: %s", o.res.Stdout)
	}
	if !strings.Contains(o.res.Stdout, "FD6 pipe:[") || !strings.Contains(o.res.Stdout, " 0o1\n") {
		t.Errorf("fd 6 is not the write end of a pipe: %s", o.res.Stdout)
	}
	// Session leader (setsid): no controlling terminal to inject into;
	// the child of the reaper, PID 1.
	if !strings.Contains(o.res.Stdout, "CWD /workspace LEADER True PPID 1") {
		t.Errorf("unexpected cwd/session: %s", o.res.Stdout)
	}
}
