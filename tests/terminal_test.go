package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's two ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	return m, s
}

// onTerminal runs nsbox with its stdout and stderr on a new terminal and
// returns what the terminal received (\n arrives as \r\n) and the exit code.
func onTerminal(t *testing.T, args ...string) (string, int) {
	t.Helper()
	master, slave := openPTY(t)
	defer master.Close()
	cmd := exec.Command(nsboxBin, args...)
	state := t.TempDir()
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+filepath.Join(state, "audit.db"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, slave, slave
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&got, master); close(done) }() // ends with EIO once every slave is closed
	err := cmd.Run()
	slave.Close()
	<-done
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run nsbox: %v", err)
	}
	return got.String(), cmd.ProcessState.ExitCode()
}

// TestTerminalControlSequences: on a terminal, a program's escape
// sequences (clear screen, cursor up and erase: hiding nsbox's status
// line; OSC 52: the clipboard; OSC 0: the title), C1 controls and bidi
// overrides are shown as text, and nsbox's line after an unfinished line
// starts on a fresh one. --raw-output passes them; a pipe gets the bytes
// unchanged.
func TestTerminalControlSequences(t *testing.T) {
	needRoot(t)
	prog := `import sys, time
sys.stdout.write("\x1b]52;c;Y2FuYXJ5\x07\x1b]0;pwned\x07\x1b[2J")
sys.stdout.write("\u009b1A\u202eevil\n")
sys.stdout.flush()
time.sleep(0.5)  # stdout reaches the terminal first
sys.stderr.write("\x1b[1A\x1b[2Kpartial")
sys.stderr.flush()
time.sleep(30)
`
	s := startServe(t, "")
	s.ready(t)
	for _, via := range [][]string{nil, {"--server", "unix:" + s.sock}} {
		args := append(append([]string{"run"}, via...), "--policy", "default", "--timeout", "2s", "-c", prog)
		out, code := onTerminal(t, args...)
		if code != 124 {
			t.Errorf("%v: exit %d, want 124 (timeout); terminal:\n%q", via, code, out)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") {
			t.Errorf("%v: a control sequence reached the terminal: %q", via, out)
		}
		// The two streams reach the terminal in either order; nsbox's
		// line comes last, on a line of its own.
		for _, want := range []string{
			"^[]52;c;Y2FuYXJ5^G^[]0;pwned^G^[[2J<U+009B>1A<U+202E>evil\r\n",
			"^[[1A^[[2Kpartial",
			"\r\nnsbox: timeout: ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: terminal shows %q, want it to contain %q", via, out, want)
			}
		}
	}

	out, _ := onTerminal(t, "run", "--policy", "default", "--raw-output", "-c", `print("\x1b[1mbold\x1b[0m", end="")`)
	if !strings.Contains(out, "\x1b[1mbold\x1b[0m") {
		t.Errorf("--raw-output: terminal shows %q, want the sequence unchanged", out)
	}

	o := nsbox(t, run{args: []string{"run", "--policy", "default", "-c", `print("\x1b[1mbold\x1b[0m")`}})
	if string(o.stdout) != "\x1b[1mbold\x1b[0m\n" {
		t.Errorf("to a pipe: %q, want the bytes unchanged", o.stdout)
	}
}
