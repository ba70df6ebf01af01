package tests

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
)

// A program that prints for as long as it is let, bounded: at most 20 s.
const printForever = `import time
end = time.monotonic() + 20
while time.monotonic() < end:
    print("x" * 100)
`

// TestCallerClosesStdout: `nsbox run ... | head -1`. The reader goes away
// after one line; nsbox must not die of SIGPIPE (exit 141) but stop the
// run: status killed with a reason naming stdout, exit 137, the audit row
// finished, no run directory, cgroup or process left.
func TestCallerClosesStdout(t *testing.T) {
	needRoot(t)
	state := t.TempDir()
	db := filepath.Join(state, "audit.db")
	cmd := exec.Command(nsboxBin, "run", "--policy", "default", "-c", printForever)
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+db)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// head -1: read one line, then close the pipe.
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("read the first line: %v", err)
	}
	out.Close()
	err = cmd.Wait()
	elapsed := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("nsbox ended with %v, want exit 137", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if ws.Signaled() || ws.ExitStatus() != result.ExitKilled {
		t.Fatalf("nsbox ended with %v (signaled %v), want exit %d, not SIGPIPE; stderr: %s", err, ws.Signaled(), result.ExitKilled, stderr.String())
	}
	if elapsed > 10*time.Second {
		t.Errorf("nsbox took %v to notice its reader was gone", elapsed)
	}
	if !strings.Contains(stderr.String(), "stdout") {
		t.Errorf("stderr %q does not say that stdout was closed", stderr.String())
	}
	rows := auditRows(t, db)
	if len(rows) != 1 || rows[0]["status"] != string(result.StatusKilled) {
		t.Errorf("audit rows %v, want one finished row with status killed", rows)
	}
	(&outcome{state: state}).noLeftovers(t)
}

// TestOutputToFullDisk: plain mode with stdout on /dev/full. The output
// cannot be delivered: nsbox says so on stderr and exits non-zero instead
// of reporting success.
func TestOutputToFullDisk(t *testing.T) {
	needRoot(t)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	state := t.TempDir()
	cmd := exec.Command(nsboxBin, "run", "--policy", "default", "-c", "print('hello')")
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+filepath.Join(state, "audit.db"))
	cmd.Stdout = full
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	// Killed while the program ran (137), or reported as lost after it
	// ended (125): which one depends on who is faster, nsbox's reader or
	// the program's exit; both tell the caller.
	var ee *exec.ExitError
	if !errors.As(err, &ee) || (ee.ExitCode() != result.ExitKilled && ee.ExitCode() != result.ExitSandboxError) {
		t.Errorf("nsbox with stdout on /dev/full ended with %v, want exit %d or %d", err, result.ExitKilled, result.ExitSandboxError)
	}
	if !strings.Contains(stderr.String(), "stdout") || !strings.Contains(stderr.String(), "no space left") {
		t.Errorf("stderr %q does not report the failed write to stdout", stderr.String())
	}
	(&outcome{state: state}).noLeftovers(t)
}

// TestSlowCallerKeepsOutput: a caller that reads nsbox's stdout late,
// through a pipe of one page, while the program has already written past
// the output cap and exited. nsbox must drain what the program left in its
// pipe at the caller's pace, so that the limit is still seen (exit 137,
// output_limit), instead of closing the pipe half a second after the
// program ended and reporting ok with the output cut.
func TestSlowCallerKeepsOutput(t *testing.T) {
	needRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatalf("F_SETPIPE_SZ: %v", err)
	}
	cmd := exec.Command(nsboxBin, "run", "--policy", "default", "--timeout", "20s", "--output-limit", "64KiB",
		"-c", `import sys; sys.stdout.write("x" * 70000)`)
	state := t.TempDir()
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+filepath.Join(state, "audit.db"))
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	time.Sleep(3 * time.Second) // the program has long ended; its output waits
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 137 || !strings.Contains(stderr.String(), "output_limit: stdout exceeded 65536 bytes") {
		t.Errorf("exit %d, stderr %q, %d bytes of stdout; want 137 and the output limit", code, stderr.String(), len(out))
	}
	if len(out) != 65536 {
		t.Errorf("%d bytes of stdout, want the 65536 under the cap", len(out))
	}
}
