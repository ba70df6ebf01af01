package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// The reaper is PID 1 of every run; the program is its child. These tests
// check what that changes for a program (its own signals and aborts end
// it, its orphans are reaped), that a signal sent to the sandbox reaches
// the program, and that the reaper gives the program nothing to attack.

// TestProgramEndsByItsOwnSignal: a program that aborts, or signals itself
// with no handler, ends by that signal and the result says which. As PID
// 1, the kernel dropped such signals: os.abort() ended in SIGSEGV and
// SIGTERM did nothing.
func TestProgramEndsByItsOwnSignal(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		policy, code string
		signal       syscall.Signal
	}{
		{"strict", "import os; os.abort()", syscall.SIGABRT},
		{"default", "import os; os.abort()", syscall.SIGABRT},
		{"default", "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')", syscall.SIGTERM},
		{"default", "import os, signal; os.kill(os.getpid(), signal.SIGKILL); print('survived')", syscall.SIGKILL},
	} {
		t.Run(tc.policy+"/"+tc.signal.String(), func(t *testing.T) {
			o := runPy(t, tc.policy, tc.code)
			o.wantStatus(t, result.StatusError)
			if o.res.Signal == nil || *o.res.Signal != int(tc.signal) || o.res.ExitCode != nil {
				t.Errorf("signal %s exit_code %s, want signal %d (%s)", ptr(o.res.Signal), ptr(o.res.ExitCode), tc.signal, tc.signal)
			}
			if o.exit != 128+int(tc.signal) {
				t.Errorf("exit %d, want %d", o.exit, 128+int(tc.signal))
			}
			if strings.Contains(o.res.Stdout, "survived") {
				t.Errorf("the program outlived its own signal: %q", o.res.Stdout)
			}
			o.noLeftovers(t)
		})
	}
}

// orphanCode double-forks: the child exits at once, so the grandchild
// becomes an orphan of the namespace, and exits 0.2 s later. The program
// then watches the grandchild's /proc entry: "gone" once it was reaped,
// "Z" if it stays a zombie for 5 s. Bounded: two short-lived processes.
const orphanCode = `
import os, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    gc = os.fork()
    if gc == 0:
        time.sleep(0.2)
        os._exit(0)
    os.write(w, str(gc).encode())
    os._exit(0)
os.waitpid(pid, 0)
gc = int(os.read(r, 32))
state = "?"
for _ in range(100):
    try:
        with open("/proc/%d/status" % gc) as f:
            state = [l for l in f if l.startswith("State:")][0].split()[1]
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: reaped between open and read
        state = "gone"
        break
    time.sleep(0.05)
print("ORPHAN", state, "PPID", os.getppid())
`

// TestOrphansAreReaped: an orphan that exits is reaped while the run goes
// on, not left a zombie until the end (as it was with the program as PID
// 1, a Python program that never calls wait on strangers).
func TestOrphansAreReaped(t *testing.T) {
	needRoot(t)
	o := runPy(t, "default", orphanCode)
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(o.res.Stdout, "ORPHAN gone PPID 1") {
		t.Errorf("the orphan was not reaped within 5 s: %q", o.res.Stdout)
	}
	o.noLeftovers(t)
}

// signalCode waits for a signal to the sandbox: SIGUSR1 has a handler
// that prints and exits 3, SIGTERM has none. It marks itself ready in
// /workspace and gives up after 20 s.
const signalCode = `
import os, signal, sys, time
def usr1(sig, frame):
    print("got SIGUSR1", flush=True)
    sys.exit(3)
signal.signal(signal.SIGUSR1, usr1)
open("/workspace/ready", "w").close()
time.sleep(20)
print("no signal came", flush=True)
`

// TestSignalsReachTheProgram: a signal sent from the host to the
// sandbox's PID 1 (the reaper) is forwarded to the program, which handles
// it or dies of it; the result reports the program's own end.
func TestSignalsReachTheProgram(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		sig      syscall.Signal
		exit     int
		signal   int
		stdout   string
		policies []string
	}{
		{syscall.SIGUSR1, 3, 0, "got SIGUSR1", []string{"strict", "default"}},
		{syscall.SIGTERM, 128 + 15, 15, "", []string{"strict", "default"}},
	} {
		for _, policy := range tc.policies {
			t.Run(policy+"/"+tc.sig.String(), func(t *testing.T) {
				sent := false
				o := nsbox(t, run{
					args: []string{"run", "--json", "--policy", osOnly(t, policy), "-c", signalCode},
					whileRuns: func(p *os.Process) {
						pid1 := sandboxOf(t, p.Pid, 10*time.Second)
						if !waitFile(fmt.Sprintf("/proc/%d/root/workspace/ready", pid1), 10*time.Second) {
							t.Errorf("the program never got ready")
							return
						}
						sent = syscall.Kill(pid1, tc.sig) == nil
					},
				})
				if !sent {
					t.Fatalf("could not signal the sandbox: %s", o.stderr)
				}
				if o.exit != tc.exit {
					t.Errorf("exit %d, want %d; stdout %q", o.exit, tc.exit, o.res.Stdout)
				}
				if tc.signal != 0 && (o.res.Signal == nil || *o.res.Signal != tc.signal) {
					t.Errorf("signal %s, want %d", ptr(o.res.Signal), tc.signal)
				}
				if !strings.Contains(o.res.Stdout, tc.stdout) || strings.Contains(o.res.Stdout, "no signal came") {
					t.Errorf("stdout %q, want %q", o.res.Stdout, tc.stdout)
				}
				o.noLeftovers(t)
			})
		}
	}
}

// reaperAttack goes after PID 1 from inside, under permissive (every
// Python route open): signal it, read its memory, descriptors, root and
// environment, ptrace it. Each must fail; the program's own end must be
// what the result reports. Harmless if uncontained: every target is the
// sandbox's own PID 1, and a signal is SIGUSR2, which the reaper would
// only pass back to the program (which ignores it).
const reaperAttack = `
import ctypes, os, signal
signal.signal(signal.SIGUSR2, signal.SIG_IGN)
def attempt(name, f):
    try:
        f()
        print(name, "OK")
    except OSError as e:
        print(name, e.__class__.__name__)
attempt("kill", lambda: os.kill(1, signal.SIGUSR2))
attempt("mem", lambda: open("/proc/1/mem", "rb").read(1))
attempt("fd", lambda: os.listdir("/proc/1/fd"))
attempt("root", lambda: os.listdir("/proc/1/root/"))
attempt("environ", lambda: open("/proc/1/environ", "rb").read())
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", "OK" if libc.ptrace(16, 1, 0, 0) == 0 else os.strerror(ctypes.get_errno()))  # PTRACE_ATTACH
raise SystemExit(5)
`

// TestReaperOutOfReach: the program can neither signal nor look into the
// reaper, and the reaper keeps no descriptor of the run but /dev/null and
// its exit pipe (checked from the host while the program runs).
func TestReaperOutOfReach(t *testing.T) {
	needRoot(t)
	var fds []string
	o := nsbox(t, run{
		args: []string{"run", "--json", "--policy", "permissive", "-c", "import time; open('/workspace/ready','w').close(); time.sleep(3)"},
		whileRuns: func(p *os.Process) {
			pid1 := sandboxOf(t, p.Pid, 10*time.Second)
			if !waitFile(fmt.Sprintf("/proc/%d/root/workspace/ready", pid1), 10*time.Second) {
				t.Errorf("the program never got ready")
				return
			}
			dir := fmt.Sprintf("/proc/%d/fd", pid1)
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Errorf("read %s: %v", dir, err)
			}
			for _, e := range ents {
				p := filepath.Join(dir, e.Name())
				target, _ := os.Readlink(p)
				var st syscall.Stat_t
				if syscall.Stat(p, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == 1<<8|3 {
					target = "null" // 1:3, /dev/null (the host's, named from the new root)
				}
				if !strings.HasPrefix(target, "anon_inode:") { // the Go runtime's poller
					fds = append(fds, e.Name()+"="+target)
				}
			}
			sort.Strings(fds)
		},
	})
	o.wantStatus(t, result.StatusOK)
	if len(fds) != 4 || !slices.Contains(fds, "0=null") || !slices.Contains(fds, "1=null") || !slices.Contains(fds, "2=null") ||
		!strings.Contains(strings.Join(fds, " "), "=pipe:[") {
		t.Errorf("the reaper's descriptors: %v, want /dev/null on 0-2 and its exit pipe", fds)
	}

	o = nsbox(t, run{args: []string{"run", "--json", "--policy", "permissive", "-c", reaperAttack}})
	o.wantStatus(t, result.StatusError)
	if o.res.ExitCode == nil || *o.res.ExitCode != 5 {
		t.Errorf("exit_code %s, want the program's own 5", ptr(o.res.ExitCode))
	}
	for _, want := range []string{"kill PermissionError", "mem PermissionError", "fd PermissionError",
		"root PermissionError", "environ PermissionError"} {
		if !strings.Contains(o.res.Stdout, want+"\n") {
			t.Errorf("stdout lacks %q:\n%s", want, o.res.Stdout)
		}
	}
	if strings.Contains(o.res.Stdout, "ptrace OK") || !strings.Contains(o.res.Stdout, "ptrace ") {
		t.Errorf("ptrace of the reaper did not fail:\n%s", o.res.Stdout)
	}
	o.noLeftovers(t)
}
