package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// cgroupRoots are the hierarchies a run's cgroup lives in (nsbox/<run id>
// under each): the unified one on a cgroup v2 host, else the v1 ones.
var cgroupRoots = func() []string {
	if unifiedCgroup() {
		return []string{"/sys/fs/cgroup"}
	}
	return []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/freezer"}
}()

// runCgroups lists the run cgroups that exist under the nsbox parent in
// any hierarchy.
func runCgroups(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, root := range cgroupRoots {
		entries, err := os.ReadDir(filepath.Join(root, "nsbox"))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, filepath.Join(root, "nsbox", e.Name()))
			}
		}
	}
	return out
}

// TestForkBombStopsAtPidsMax: default allows 64 tasks. The payload forks
// up to 200 children (each sleeps at most 3 s) and counts refused forks:
// fork must fail inside (EAGAIN from pids.max) without hanging the run,
// and afterwards no process of the sandbox uid is left on the host. Under
// strict, whose seccomp profile allows threads but no fork, the same
// payload cannot fork at all (EPERM).
func TestForkBombStopsAtPidsMax(t *testing.T) {
	needRoot(t)
	code := `
import os, time, errno
kids, refused = [], {}
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        refused[errno.errorcode[e.errno]] = refused.get(errno.errorcode[e.errno], 0) + 1
        continue
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print("FORKED", len(kids), "REFUSED", sorted(refused.items()))
for k in kids:
    os.kill(k, 9)
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	var forked int
	if _, err := fmt.Sscanf(o.res.Stdout, "FORKED %d", &forked); err != nil {
		t.Fatalf("unexpected output %q: %v", o.res.Stdout, err)
	}
	if forked >= 64 || forked < 32 || !strings.Contains(o.res.Stdout, "('EAGAIN', ") {
		t.Errorf("%s: want 32..63 forks (pids.max 64 counts the parent) and the rest refused with EAGAIN", strings.TrimSpace(o.res.Stdout))
	}
	if got := o.res.Limits; got == nil || got.Pids == nil || *got.Pids != 64 {
		t.Errorf("limits.pids = %+v, want 64", got)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Errorf("sandbox processes left on the host: %v", left)
	}

	o = runPy(t, "strict", code)
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(o.res.Stdout, "FORKED 0 REFUSED [('EPERM', 200)]") {
		t.Errorf("strict: %s, want every fork refused with EPERM", o.res.Stdout)
	}
}

// TestMemoryBombIsMemoryLimit allocates and touches up to 6 GiB in 64 MiB
// steps under strict (256 MiB, swap off): the OOM killer ends it, the run
// says memory_limit, and the cgroup's peak is near the limit.
func TestMemoryBombIsMemoryLimit(t *testing.T) {
	needRoot(t)
	code := `
blocks = []
for i in range(96):
    blocks.append(b"\x01" * (64 << 20))
    print("allocated", (i + 1) * 64, "MiB", flush=True)
print("NOLIMIT")
`
	o := runPy(t, "strict", code)
	o.wantStatus(t, result.StatusMemoryLimit)
	if o.res.Limit != result.LimitMemory || o.exit != result.ExitKilled {
		t.Errorf("limit %q exit %d, want %q and %d", o.res.Limit, o.exit, result.LimitMemory, result.ExitKilled)
	}
	if strings.Contains(o.res.Stdout, "NOLIMIT") || strings.Contains(o.res.Stdout, "allocated 320 MiB") {
		t.Errorf("allocated past the 256 MiB limit: %s", o.res.Stdout)
	}
	if p := o.res.PeakMemoryBytes; p == nil || *p < 128<<20 || *p > 300<<20 {
		t.Errorf("peak_memory_bytes = %v, want between 128 MiB and 300 MiB", p)
	}
}

// TestCPUQuota runs 8 spinning processes for 2 s under one CPU of quota on
// a multi-core host: together they get at most about one CPU's worth
// (loose bound: 1.4x the spin time), not eight, and the cgroup's cpu_ms
// counts what they got (their own CPU time, from os.times after reaping,
// is the reference, so a busy test machine cannot fail the check).
func TestCPUQuota(t *testing.T) {
	needRoot(t)
	code := `
import os, time
start = time.monotonic()
kids = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 2
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
t = os.times()
print("SPIN_MS", int((time.monotonic() - start) * 1000), "KIDS_CPU_MS", int((t.children_user + t.children_system) * 1000))
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	var spin, kids int64
	if _, err := fmt.Sscanf(o.res.Stdout, "SPIN_MS %d KIDS_CPU_MS %d", &spin, &kids); err != nil {
		t.Fatalf("unexpected output %q: %v", o.res.Stdout, err)
	}
	if o.res.CPUMS == nil {
		t.Fatal("cpu_ms is null")
	}
	cpu := *o.res.CPUMS
	t.Logf("8 spinners for %d ms got %d ms of CPU; the cgroup counted %d ms for the run (quota 1 CPU)", spin, kids, cpu)
	if kids > spin*14/10+200 {
		t.Errorf("spinners got %d ms of CPU in %d ms: more than 1.4 CPUs, the quota is not enforced", kids, spin)
	}
	if cpu < kids*9/10 {
		t.Errorf("cgroup cpu_ms %d is below the spinners' own %d ms: usage is not counted", cpu, kids)
	}
}

// TestCPUTimeLimit: a policy with cpu_time 1s and a 20 s wall clock stops
// a busy loop through RLIMIT_CPU: status timeout, limit cpu_time.
func TestCPUTimeLimit(t *testing.T) {
	needRoot(t)
	pol := writePolicy(t, "strict", map[string]string{`cpu_time = "10s"`: `cpu_time = "1s"`, `timeout = "10s"`: `timeout = "20s"`})
	o := runPy(t, pol, "while True: pass")
	o.wantStatus(t, result.StatusTimeout)
	if o.res.Limit != result.LimitCPUTime || o.exit != result.ExitTimeout {
		t.Errorf("limit %q exit %d, want %q and %d", o.res.Limit, o.exit, result.LimitCPUTime, result.ExitTimeout)
	}
	if o.elapsed > scaled(10*time.Second) {
		t.Errorf("run took %v: the wall clock, not RLIMIT_CPU, ended it", o.elapsed)
	}
}

// TestRlimitsInside reads the program's rlimits and writes past
// RLIMIT_FSIZE (strict: 16 MiB) in /workspace: EFBIG, not a full disk.
func TestRlimitsInside(t *testing.T) {
	needRoot(t)
	code := `
import resource as r, errno
for name in ("CORE", "NOFILE", "FSIZE", "STACK", "CPU", "AS"):
    print(name, *r.getrlimit(getattr(r, "RLIMIT_" + name)))
try:
    with open("/workspace/big", "wb") as f:
        for _ in range(17):
            f.write(b"\0" * (1 << 20))
            f.flush()
    print("WROTE 17MiB")
except OSError as e:
    print("WRITE", errno.errorcode[e.errno])
`
	o := runPy(t, "strict", code)
	o.wantStatus(t, result.StatusOK)
	for _, want := range []string{
		"CORE 0 0\n", "NOFILE 256 256\n", fmt.Sprintf("FSIZE %d %d\n", 16<<20, 16<<20),
		fmt.Sprintf("STACK %d %d\n", 8<<20, 8<<20), "CPU 10 10\n", "AS -1 -1\n", "WRITE EFBIG\n",
	} {
		if !strings.Contains(o.res.Stdout, want) {
			t.Errorf("want %q in:\n%s", want, o.res.Stdout)
		}
	}
}

// TestNoCgroupLeftAfterManyRuns: 100 runs, a third of them killed at a
// 200 ms timeout and some hitting the memory limit, leave no cgroup.
func TestNoCgroupLeftAfterManyRuns(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("100 runs")
	}
	before := len(runCgroups(t))
	state := t.TempDir()
	for i := range 100 {
		args := []string{"run", "--json", "--policy", "strict"}
		code := "print(1)"
		switch i % 3 {
		case 1:
			args, code = append(args, "--timeout", "200ms"), "while True: pass"
		case 2:
			if i%10 == 2 {
				code = `x = [b"\x01" * (64 << 20) for _ in range(8)]`
			}
		}
		o := nsbox(t, run{args: append(args, "-c", code), state: state})
		if o.res.Status == result.StatusSandboxError {
			t.Fatalf("run %d: sandbox_error %+v", i, o.res.Error)
		}
	}
	if got := runCgroups(t); len(got) > before {
		t.Errorf("cgroups left after 100 runs: %v", got)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Errorf("sandbox processes left: %v", left)
	}
}

// TestCrashedSupervisorCgroupSwept: SIGKILL to nsbox mid-run leaves its
// cgroup (PDEATHSIG empties it); the next run removes it.
func TestCrashedSupervisorCgroupSwept(t *testing.T) {
	needRoot(t)
	before := runCgroups(t)
	ws := sandboxWorkspace(t)
	state := t.TempDir()
	nsbox(t, run{
		args:  []string{"run", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", escapeCode(true)},
		state: state,
		whileRuns: func(p *os.Process) {
			if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
				t.Errorf("payload never got ready")
			}
			p.Kill()
		},
	})
	// Only this state dir's: runs of another suite come and go meanwhile.
	left, _ := stressCgroups(t, state)
	left = without(left, before)
	if len(left) == 0 {
		t.Fatal("the crashed run left no cgroup: nothing to sweep (was it in one?)")
	}
	o := nsbox(t, run{args: []string{"run", "--json", "-c", "pass"}, state: state})
	o.wantStatus(t, result.StatusOK)
	for _, p := range left {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("stale cgroup %s not swept by the next run", p)
		}
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Errorf("sandbox processes left: %v", left)
	}
}

func without(all, old []string) []string {
	var out []string
	for _, p := range all {
		found := false
		for _, q := range old {
			found = found || p == q
		}
		if !found {
			out = append(out, p)
		}
	}
	return out
}

// writePolicy writes a copy of a built-in policy with some lines replaced
// and returns its path.
func writePolicy(t *testing.T, builtin string, replace map[string]string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "policies", builtin+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for old, new := range replace {
		if !strings.Contains(s, old) {
			t.Fatalf("%s.toml has no %q", builtin, old)
		}
		s = strings.Replace(s, old, new, 1)
	}
	s = scalePolicyTimeout(t, builtin, s)
	p := filepath.Join(t.TempDir(), builtin+"-test.toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailClosedWithoutCgroups hides the host's cgroup hierarchies from
// nsbox (a private mount namespace with an empty tmpfs on /sys/fs/cgroup):
// strict, which requires cgroups, refuses to run (exit 125, the doctor's
// advice in the message) and starts nothing; permissive, which does not,
// runs and reports that no cgroup was active and no cgroup limit applied.
func TestFailClosedWithoutCgroups(t *testing.T) {
	needRoot(t)
	mustHave(t, "unshare")
	wrap := func(policy string) (*outcome, bool) {
		ws := sandboxWorkspace(t)
		script := `mount -t tmpfs nsbox-test-nocgroup /sys/fs/cgroup && exec "$0" "$@"`
		o := nsbox(t, run{
			via:  []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script},
			args: []string{"run", "--json", "--policy", policy, "--workspace", ws, "-c", "open('/workspace/ran', 'w').write('x')"},
		})
		_, err := os.Stat(filepath.Join(ws, "ran"))
		return o, err == nil
	}

	o, ran := wrap("strict")
	o.wantStatus(t, result.StatusSandboxError)
	if o.exit != result.ExitSandboxError || ran {
		t.Errorf("exit %d ran %v, want 125 and the program never started", o.exit, ran)
	}
	if e := o.res.Error; e == nil || e.Step != "requirements" || !strings.Contains(e.Message, "cgroups") || !strings.Contains(e.Message, "nsbox doctor") {
		t.Errorf("error %+v, want step requirements naming cgroups and `nsbox doctor`", e)
	}
	if l := o.res.Limits; l == nil || l.TimeoutMS != scaled(10*time.Second).Milliseconds() || l.MemoryBytes != nil || o.res.Sandbox != nil {
		t.Errorf("refused run: limits %+v sandbox %+v, want the policy's limits without cgroup ones and no sandbox", l, o.res.Sandbox)
	}

	o, ran = wrap("permissive")
	o.wantStatus(t, result.StatusOK)
	if sb := o.res.Sandbox; sb == nil || sb.Cgroup != "none" || !ran {
		t.Errorf("sandbox %+v ran %v, want cgroup none and the program run", sb, ran)
	}
	if l := o.res.Limits; l == nil || l.MemoryBytes != nil || l.Pids != nil || l.CPUs != nil || o.res.CPUMS != nil {
		t.Errorf("limits %+v cpu_ms %v: cgroup limits reported without a cgroup", l, o.res.CPUMS)
	}
}

// TestSweepSparesOtherStateDirs: a run with another NSBOX_STATE_DIR
// cannot tell whether this run is live, so its sweep must leave this
// run's cgroup (and processes) alone.
func TestSweepSparesOtherStateDirs(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	code := `
import time
open("/workspace/started", "w").close()
time.sleep(1.5)
print("survived")
`
	o := nsbox(t, run{
		args: []string{"run", "--json", "--workspace", ws, "-c", code},
		whileRuns: func(*os.Process) {
			if !waitFile(filepath.Join(ws, "started"), 10*time.Second) {
				t.Errorf("program did not start")
				return
			}
			other := nsbox(t, run{args: []string{"run", "--json", "-c", "pass"}})
			other.wantStatus(t, result.StatusOK)
		},
	})
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "survived\n" {
		t.Errorf("stdout %q", o.res.Stdout)
	}
}
