package tests

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// escapeCode starts processes that try to outlive the run: a setsid'd
// child, a double-forked daemon, each ignoring SIGTERM/SIGHUP and writing
// a heartbeat into /workspace every 50 ms for at most 20 s. Then the
// program itself either spins (timeout case) or exits (normal case).
func escapeCode(thenSpin bool) string {
	tail := "os._exit(0)"
	if thenSpin {
		tail = "while True: pass"
	}
	return `
import os, signal, time
def beat(name):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    deadline = time.time() + 20
    while time.time() < deadline:
        with open("/workspace/" + name, "a") as f:
            f.write(".")
        time.sleep(0.05)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    beat("setsid")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        beat("daemon")
    os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while not (os.path.exists("/workspace/setsid") and os.path.exists("/workspace/daemon")):
    time.sleep(0.01)
open("/workspace/ready", "w").close()
` + tail
}

// heartbeatsStopped checks on the host that the escapees no longer write
// and that no process of the sandbox user is left.
func heartbeatsStopped(t *testing.T, ws string) {
	t.Helper()
	for _, name := range []string{"setsid", "daemon"} {
		if _, err := os.Stat(filepath.Join(ws, name)); err != nil {
			t.Fatalf("escapee %s never ran: %v", name, err)
		}
	}
	size := func() int64 {
		var n int64
		for _, name := range []string{"setsid", "daemon"} {
			fi, _ := os.Stat(filepath.Join(ws, name))
			n += fi.Size()
		}
		return n
	}
	before := size()
	time.Sleep(300 * time.Millisecond)
	if after := size(); after != before {
		t.Errorf("escapees still running after nsbox returned: heartbeats grew %d -> %d", before, after)
	}
	if pids := sandboxProcesses(t); len(pids) > 0 {
		t.Errorf("host: processes of the sandbox uid still alive: %v", pids)
		for _, p := range pids {
			if pid, err := atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL) // our own escaped payload
			}
		}
	}
}

func TestTimeoutKillsEveryProcess(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	timeout := scaled(2 * time.Second)
	o := nsbox(t, run{args: []string{"run", "--json", "--timeout", timeout.String(), "--policy", osOnly(t, "default"), "--workspace", ws, "-c", escapeCode(true)}})
	o.wantStatus(t, result.StatusTimeout)
	if o.exit != 124 {
		t.Errorf("exit %d, want 124", o.exit)
	}
	if o.res.Signal == nil || *o.res.Signal != int(syscall.SIGKILL) {
		t.Errorf("signal %v, want SIGKILL", o.res.Signal)
	}
	if bound := timeout + scaled(time.Second); o.elapsed > bound {
		t.Errorf("nsbox returned after %v, more than the %v timeout plus %v", o.elapsed, timeout, bound-timeout)
	}
	if _, err := os.Stat(filepath.Join(ws, "ready")); err != nil {
		t.Fatalf("payload did not get going before the timeout: %v", err)
	}
	heartbeatsStopped(t, ws)
}

func TestNormalExitKillsLeftovers(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", escapeCode(false)}})
	o.wantStatus(t, result.StatusOK)
	heartbeatsStopped(t, ws)
}

// TestStopByHand sends SIGINT, SIGTERM and SIGQUIT to nsbox during a run.
func TestStopByHand(t *testing.T) {
	needRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			ws := sandboxWorkspace(t)
			o := nsbox(t, run{
				args: []string{"run", "--json", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", escapeCode(true)},
				whileRuns: func(p *os.Process) {
					if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
						t.Errorf("payload never got ready")
					}
					p.Signal(sig)
				},
			})
			o.wantStatus(t, result.StatusKilled)
			if o.exit != 137 {
				t.Errorf("exit %d, want 137", o.exit)
			}
			heartbeatsStopped(t, ws)
			o.noLeftovers(t)
		})
	}
}

// TestOutputFloodCapped writes up to 1 GiB to stdout under the strict
// 64 KiB cap: the run is stopped, exactly the cap is kept, and nsbox's own
// memory stays small.
func TestOutputFloodCapped(t *testing.T) {
	needRoot(t)
	code := `
import sys
chunk = b"x" * (1 << 20)
for _ in range(1024):
    sys.stdout.buffer.write(chunk)
`
	// nsbox's own peak RSS: its VmHWM, sampled while it runs. (wait4's
	// ru_maxrss would also count the test binary's RSS, which fork and
	// exec carry over, and grows as the suite runs.)
	var peak atomic.Int64
	sampling := make(chan struct{})
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", osOnly(t, "strict"), "-c", code},
		whileRuns: func(p *os.Process) {
			go func() {
				defer close(sampling)
				for {
					v := vmHWM(p.Pid) // 0 once it is a zombie or gone
					if v == 0 {
						return
					}
					if v > peak.Load() {
						peak.Store(v)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}})
	<-sampling
	o.wantStatus(t, result.StatusOutputLimit)
	if !o.res.StdoutTruncated || len(o.res.Stdout) != 64<<10 {
		t.Errorf("stdout %d bytes, truncated %v; want exactly 65536, truncated", len(o.res.Stdout), o.res.StdoutTruncated)
	}
	if o.exit != 137 {
		t.Errorf("exit %d, want 137", o.exit)
	}
	// In KiB. The flood is 1 GiB; nsbox must not grow with it.
	hwm := peak.Load()
	t.Logf("nsbox peak RSS %d KiB", hwm)
	if hwm == 0 || hwm > 64<<10 {
		t.Errorf("nsbox peak RSS %d KiB (0: never sampled), want under 64 MiB", hwm)
	}
	o.noLeftovers(t)
}

func TestStderrFloodCappedPlainMode(t *testing.T) {
	needRoot(t)
	code := `
import sys
for _ in range(4096):
    sys.stderr.write("e" * 1024)
`
	o := nsbox(t, run{args: []string{"run", "--policy", osOnly(t, "strict"), "--output-limit", "4KiB", "-c", code}})
	if o.exit != 137 {
		t.Errorf("exit %d, want 137", o.exit)
	}
	// Plain mode: the kept bytes pass through, then nsbox's one-line
	// notice, on a line of its own.
	want := string(repeat('e', 4096)) + "\nnsbox: output_limit: stderr exceeded 4096 bytes\n"
	if string(o.stderr) != want {
		t.Errorf("stderr %q... (%d bytes), want the 4096 kept bytes and the notice", head(o.stderr), len(o.stderr))
	}
}
