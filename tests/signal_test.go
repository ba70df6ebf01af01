package tests

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestCannotSignalHostProcess starts a canary process on the host (the
// test's own child) and has the program try to kill it by pid and with
// kill(-1): the canary survives.
func TestCannotSignalHostProcess(t *testing.T) {
	needRoot(t)
	canary := exec.Command("sleep", "30")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer canary.Process.Kill()
	pid := canary.Process.Pid
	code := `
import os, signal
try:
    os.kill(` + strconv.Itoa(pid) + `, signal.SIGKILL)
    print("KILLED")
except OSError as e:
    print("FAILED", type(e).__name__)
try:
    os.kill(-1, signal.SIGKILL)
except OSError as e:
    pass
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(o.res.Stdout, "FAILED ProcessLookupError") {
		t.Errorf("kill(host pid) from inside: %q", o.res.Stdout)
	}
	if err := canary.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("host canary process %d died: %v", pid, err)
	}
}
