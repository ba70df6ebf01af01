package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// The stress suite: many runs of a mix of programs,
// sequential, concurrent, and with the supervisor SIGKILLed at a random
// moment; afterwards nothing may be left on the host (processes of the
// sandbox uid, run cgroups, mounts, run directories), the supervisor stays
// small, and the audit log holds exactly one row per run.
//
// Sizes come from the environment; the defaults are the short CI form
// (well under a minute on two cores), `make stress` sets the full ones:
//
//	NSBOX_STRESS_SEQ    sequential runs                 (default 40)
//	NSBOX_STRESS_CONC   concurrent runs                 (default 24)
//	NSBOX_STRESS_PAR    concurrent runs at a time       (default 8)
//	NSBOX_STRESS_KILLS  runs whose supervisor is killed (default 5)
//
// Every payload is bounded: the memory bomb stops at 1 GiB, the flood at
// 64 MiB, the fork bomb at 200 children that sleep 2 s, the daemons live
// 10 s at most.

// stressProg is one kind of program in the mix.
type stressProg struct {
	name   string
	policy string   // path or built-in name, used as is
	extra  []string // flags before -c
	code   string
	want   result.Status
}

// stressDaemonCode: a setsid'd child and a double-forked daemon, both
// ignoring SIGTERM/SIGHUP and living at most 10 s; the program waits until
// both are up, then exits (or sleeps tail seconds first).
func stressDaemonCode(tail float64) string {
	return fmt.Sprintf(`
import os, signal, time
r, w = os.pipe()
def daemon():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.write(w, b".")
    deadline = time.time() + 10
    while time.time() < deadline:
        time.sleep(0.05)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    daemon()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        daemon()
    os._exit(0)
got = b""
while len(got) < 2:
    got += os.read(r, 2)
print("DAEMONS UP")
time.sleep(%g)
`, tail)
}

// stressForkCode: up to 200 forks (pids.max refuses most), children sleep
// 2 s; the parent leaves them running and exits (or sleeps tail s first).
func stressForkCode(tail float64) string {
	return fmt.Sprintf(`
import os, time
forked = refused = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    forked += 1
print("FORKED", forked, "REFUSED", refused)
time.sleep(%g)
`, tail)
}

// stressMix is the program mix of the normal runs.
func stressMix(t *testing.T) []stressProg {
	strict, def := osOnly(t, "strict"), osOnly(t, "default")
	return []stressProg{
		{name: "ok", policy: "strict", code: "print(6 * 7)", want: result.StatusOK},
		{name: "error", policy: "strict", code: "raise ValueError('stress')", want: result.StatusError},
		{name: "timeout", policy: "strict", extra: []string{"--timeout", "300ms"}, code: "while True: pass", want: result.StatusTimeout},
		{name: "membomb", policy: strict, code: `
blocks = []
for i in range(16):
    blocks.append(b"\x01" * (64 << 20))
print("NOLIMIT")
`, want: result.StatusMemoryLimit},
		{name: "flood", policy: strict, code: `
import sys
chunk = b"x" * (1 << 20)
for _ in range(64):
    sys.stdout.buffer.write(chunk)
`, want: result.StatusOutputLimit},
		{name: "forkbomb", policy: def, code: stressForkCode(0), want: result.StatusOK},
		{name: "daemonizer", policy: def, code: stressDaemonCode(0), want: result.StatusOK},
	}
}

// stressKillMix are the programs whose supervisor gets killed: they run
// about 3 s, longer than the latest kill.
func stressKillMix(t *testing.T) []stressProg {
	def := osOnly(t, "default")
	return []stressProg{
		{name: "kill-daemonizer", policy: def, extra: []string{"--timeout", "6s"}, code: stressDaemonCode(3)},
		{name: "kill-forkbomb", policy: def, extra: []string{"--timeout", "6s"}, code: stressForkCode(3)},
		{name: "kill-spin", policy: def, extra: []string{"--timeout", "6s"}, code: "import time\nend = time.time() + 3\nwhile time.time() < end: pass"},
	}
}

// stressOut is what one stress run did.
type stressOut struct {
	label  string
	prog   string
	killed bool // the supervisor died of our SIGKILL
	// started: when killed, the supervisor had a child (the sandbox's
	// init) at the kill, so it was past the audit log's Begin. A
	// supervisor killed before that may have no row: nothing ran.
	started bool
	delay   time.Duration // when the kill was sent
	status  result.Status
	maxrss  int64 // KiB: ru_maxrss, which counts reaped descendants too
	hwm     int64 // KiB: the supervisor's own VmHWM, last sample
	wall    time.Duration
	err     error // an nsbox failure
}

// stressRun runs prog once with --json into the shared state dir and audit
// log, labelled; with kill >= 0 it SIGKILLs the supervisor after kill.
// Failures come back in err (it is called from many goroutines).
func stressRun(state, db, label string, p stressProg, kill time.Duration) stressOut {
	out := stressOut{label: label, prog: p.name}
	args := append([]string{"run", "--json", "--policy", p.policy, "--label", "stress=" + label}, p.extra...)
	cmd := exec.Command(nsboxBin, append(args, "-c", p.code)...)
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+db)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		out.err = fmt.Errorf("start: %w", err)
		return out
	}
	var timer *time.Timer
	var started atomic.Bool
	if kill >= 0 {
		out.delay = kill
		timer = time.AfterFunc(kill, func() {
			started.Store(hasChildren(cmd.Process.Pid))
			cmd.Process.Signal(syscall.SIGKILL)
		})
		defer timer.Stop()
	}
	// The supervisor's own peak RSS: its VmHWM, sampled until it exits
	// (ru_maxrss would include the sandbox's processes it reaped).
	done := make(chan struct{})
	sampled := make(chan int64)
	go func() {
		var hwm int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := vmHWM(cmd.Process.Pid); v > hwm {
				hwm = v
			}
			select {
			case <-done:
				sampled <- hwm
				return
			case <-tick.C:
			}
		}
	}()
	cmd.Wait()
	close(done)
	out.hwm = <-sampled
	if kill >= 0 && !timer.Stop() {
		out.started = started.Load() // the timer fired and is done (Wait returned after the kill)
	}
	out.wall = time.Since(start)
	ps := cmd.ProcessState
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		out.maxrss = ru.Maxrss
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && kill >= 0 {
		out.killed = true
		return out
	}
	var res result.Result
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		out.err = fmt.Errorf("no valid JSON result (exit %d): %v\nstdout: %.2000s\nstderr: %.2000s", ps.ExitCode(), err, stdout.Bytes(), stderr.Bytes())
		return out
	}
	if dec.More() {
		out.err = fmt.Errorf("more than one JSON object: %.2000s", stdout.Bytes())
		return out
	}
	out.status = res.Status
	want := p.want
	if kill >= 0 {
		want = result.StatusOK // a kill that came too late: the run just finished
	}
	if res.Status != want {
		out.err = fmt.Errorf("status %q (reason %q, error %+v, exit_code %s, signal %s), want %q\nstdout: %.500s\nstderr: %.2000s",
			res.Status, res.Reason, res.Error, ptr(res.ExitCode), ptr(res.Signal), want, res.Stdout, res.Stderr)
	}
	return out
}

// hasChildren reports whether process pid has a child (in any thread).
func hasChildren(pid int) bool {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if len(bytes.TrimSpace(b)) > 0 {
			return true
		}
	}
	return false
}

// vmHWM is a process's peak resident set in KiB, 0 once it is gone.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// stressEnv reads a size from the environment.
func stressEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// mountinfo returns the host's mount lines (this test's mount namespace).
func mountinfo(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// stressCgroupPrefix is the prefix of the run cgroups of state dir's runs
// (as the supervisor names them: "s" + 8 hex digits of the state dir's
// SHA-256 + "-"). Other nsbox users on the host (other tests, benchmarks)
// share the sandbox uid and the cgroup parent: the checks count only what
// belongs to this test's state dir.
func stressCgroupPrefix(state string) string {
	if abs, err := filepath.Abs(state); err == nil {
		state = abs
	}
	sum := sha256.Sum256([]byte(state))
	return "s" + hex.EncodeToString(sum[:4]) + "-"
}

// stressCgroups splits runCgroups into this state dir's and the others.
func stressCgroups(t *testing.T, state string) (ours, others []string) {
	t.Helper()
	prefix := stressCgroupPrefix(state)
	for _, cg := range runCgroups(t) {
		if strings.HasPrefix(filepath.Base(cg), prefix) {
			ours = append(ours, cg)
		} else {
			others = append(others, cg)
		}
	}
	return ours, others
}

// ourSandboxProcesses splits sandboxProcesses into this test's (in a run
// cgroup of state, or below a supervisor with NSBOX_STATE_DIR=state) and
// the rest (other nsbox users' runs).
func ourSandboxProcesses(t *testing.T, state string) (ours, others []string) {
	t.Helper()
	prefix := "/nsbox/" + stressCgroupPrefix(state)
	env := []byte("NSBOX_STATE_DIR=" + state + "\x00")
	for _, pid := range sandboxProcesses(t) {
		mine := false
		if b, err := os.ReadFile("/proc/" + pid + "/cgroup"); err == nil && bytes.Contains(b, []byte(prefix)) {
			mine = true
		}
		for p, depth := pid, 0; !mine && p != "1" && p != "0" && depth < 32; depth++ {
			if b, err := os.ReadFile("/proc/" + p + "/environ"); err == nil && bytes.Contains(b, env) {
				mine = true
			}
			st, err := os.ReadFile("/proc/" + p + "/stat")
			if err != nil {
				break
			}
			f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
			if len(f) < 2 {
				break
			}
			p = f[1]
		}
		if mine {
			ours = append(ours, pid)
		} else {
			others = append(others, pid)
		}
	}
	return ours, others
}

// waitNoSandboxProcesses polls up to d for this test's processes of the
// sandbox uid to be gone (PDEATHSIG and cgroup kills are asynchronous) and
// returns what is left.
func waitNoSandboxProcesses(t *testing.T, state string, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left, _ := ourSandboxProcesses(t, state)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// describe prints pids with their state and command line.
func describe(pids []string) string {
	var b strings.Builder
	for _, p := range pids {
		st, _ := os.ReadFile("/proc/" + p + "/stat")
		cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
		cg, _ := os.ReadFile("/proc/" + p + "/cgroup")
		var memcg string
		for _, l := range strings.Split(string(cg), "\n") {
			if strings.Contains(l, ":memory:") {
				memcg = l
			}
		}
		fmt.Fprintf(&b, "\n  %s: %.60s | %s | %s", p, st, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}), memcg)
	}
	return b.String()
}

// killSandboxProcesses SIGKILLs leaked payload processes (our own) so one
// failure does not spill into later tests.
func killSandboxProcesses(pids []string) {
	for _, p := range pids {
		if pid, err := strconv.Atoi(p); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestStress(t *testing.T) {
	needRoot(t)
	nSeq := stressEnv(t, "NSBOX_STRESS_SEQ", 40)
	nConc := stressEnv(t, "NSBOX_STRESS_CONC", 24)
	par := max(stressEnv(t, "NSBOX_STRESS_PAR", 8), 1)
	nKills := stressEnv(t, "NSBOX_STRESS_KILLS", 5)

	state := t.TempDir()
	db := filepath.Join(t.TempDir(), "audit.db")
	mix, killMix := stressMix(t), stressKillMix(t)
	if _, others := ourSandboxProcesses(t, state); len(others) > 0 {
		t.Logf("note: %d processes of the sandbox uid from other nsbox users alive at the start (not counted)", len(others))
	}
	_, otherCgroups := stressCgroups(t, state)
	mountsBefore := mountinfo(t)

	var (
		mu   sync.Mutex
		outs []stressOut
	)
	record := func(o stressOut) {
		mu.Lock()
		outs = append(outs, o)
		mu.Unlock()
		if o.err != nil {
			t.Errorf("run %s (%s): %v", o.label, o.prog, o.err)
		}
	}
	phase := map[string]time.Duration{}
	start := time.Now()

	// 1. Sequential: after each run nothing of the sandbox uid may live.
	t0 := time.Now()
	for i := range nSeq {
		p := mix[i%len(mix)]
		record(stressRun(state, db, fmt.Sprintf("seq-%d", i), p, -1))
		if left := waitNoSandboxProcesses(t, state, 0); len(left) > 0 {
			t.Errorf("after sequential run %d (%s): processes of the sandbox uid alive: %s", i, p.name, describe(left))
			killSandboxProcesses(left)
		}
	}
	phase["sequential"] = time.Since(t0)

	// 2. Concurrent: par workers over a shuffled mix.
	t0 = time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				record(stressRun(state, db, fmt.Sprintf("conc-%d", i), mix[i%len(mix)], -1))
			}
		}()
	}
	for _, i := range rand.Perm(nConc) {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	phase["concurrent"] = time.Since(t0)
	if left := waitNoSandboxProcesses(t, state, 0); len(left) > 0 {
		t.Errorf("after the concurrent runs: processes of the sandbox uid alive: %s", describe(left))
		killSandboxProcesses(left)
	}

	// 3. Killed supervisors: SIGKILL at a random moment in the first
	// 1.5 s; the sandbox must die with its supervisor (PDEATHSIG), and
	// the next run in the state dir sweeps what the dead one left.
	t0 = time.Now()
	for i := range nKills {
		delay := time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))
		o := stressRun(state, db, fmt.Sprintf("kill-%d", i), killMix[i%len(killMix)], delay)
		record(o)
		if left := waitNoSandboxProcesses(t, state, 2*time.Second); len(left) > 0 {
			t.Errorf("killed run %d (%s, SIGKILL after %v): processes of the sandbox uid alive 2 s later: %s", i, o.prog, delay.Round(time.Millisecond), describe(left))
			killSandboxProcesses(left)
		}
	}
	phase["kills"] = time.Since(t0)
	wall := time.Since(start)

	// A final normal run in the state dir sweeps the killed runs' leftovers.
	fin := stressRun(state, db, "final", mix[0], -1)
	record(fin)

	// Leftovers on the host.
	if left := waitNoSandboxProcesses(t, state, 2*time.Second); len(left) > 0 {
		t.Errorf("processes of the sandbox uid left: %s", describe(left))
		killSandboxProcesses(left)
	}
	ourCgroups, othersAfter := stressCgroups(t, state)
	if len(ourCgroups) > 0 {
		t.Errorf("run cgroups left: %v", ourCgroups)
	}
	if len(otherCgroups)+len(othersAfter) > 0 {
		t.Logf("note: run cgroups of other state dirs (not counted): %d before, %d after", len(otherCgroups), len(othersAfter))
	}
	mountsAfter := mountinfo(t)
	if len(mountsAfter) != len(mountsBefore) {
		t.Errorf("mount table had %d lines before, %d after; added %q, removed %q", len(mountsBefore), len(mountsAfter),
			lineDiff(mountsAfter, mountsBefore), lineDiff(mountsBefore, mountsAfter))
	}
	for _, l := range mountsAfter {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], state) {
			t.Errorf("mount left under the state dir: %s", l)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(state, "runs")); err == nil {
		for _, e := range entries {
			t.Errorf("run directory left: %s", filepath.Join(state, "runs", e.Name()))
		}
	}

	// Figures.
	statuses := map[string]int{}
	byProgRSS, byProgHWM := map[string]int64{}, map[string]int64{}
	var maxRSS, maxHWM int64
	var maxRSSRun, maxHWMRun string
	killed, failed := 0, 0
	for _, o := range outs {
		switch {
		case o.err != nil:
			failed++
			statuses["FAILED"]++
		case o.killed:
			killed++
			statuses["killed-by-test"]++
		default:
			statuses[string(o.status)]++
		}
		byProgRSS[o.prog] = max(byProgRSS[o.prog], o.maxrss)
		byProgHWM[o.prog] = max(byProgHWM[o.prog], o.hwm)
		if o.maxrss > maxRSS {
			maxRSS, maxRSSRun = o.maxrss, o.label+" ("+o.prog+")"
		}
		if o.hwm > maxHWM {
			maxHWM, maxHWMRun = o.hwm, o.label+" ("+o.prog+")"
		}
	}
	total := len(outs)
	t.Logf("runs: %d (sequential %d in %v, concurrent %d at %d in %v, kills %d in %v, final 1); %d supervisors actually killed, %d nsbox failures",
		total, nSeq, phase["sequential"].Round(time.Millisecond), nConc, par, phase["concurrent"].Round(time.Millisecond),
		nKills, phase["kills"].Round(time.Millisecond), killed, failed)
	t.Logf("wall: %v; %.1f runs/s overall, sequential %.1f runs/s, concurrent %.1f runs/s",
		wall.Round(time.Millisecond), float64(total-1)/wall.Seconds(),
		float64(nSeq)/phase["sequential"].Seconds(), float64(nConc)/phase["concurrent"].Seconds())
	t.Logf("statuses: %s", sortedCounts(statuses))
	t.Logf("supervisor max RSS (its own VmHWM, sampled every 5 ms): %.1f MiB (%s); per program: %s",
		float64(maxHWM)/1024, maxHWMRun, sortedRSS(byProgHWM))
	t.Logf("ru_maxrss of nsbox (includes the sandbox processes it reaped): max %.1f MiB (%s); per program: %s",
		float64(maxRSS)/1024, maxRSSRun, sortedRSS(byProgRSS))
	if maxHWM >= 64<<10 {
		t.Errorf("supervisor max RSS %d KiB (%s), want under 64 MiB", maxHWM, maxHWMRun)
	}
	if maxHWM == 0 {
		t.Errorf("no VmHWM sample of any supervisor")
	}

	// The audit log: exactly one row per run, finished with the run's
	// status, or for a killed supervisor as killed, reason "supervisor
	// died" (by a later run, or by the export below).
	rows := auditRows(t, db)
	byLabel := map[string][]map[string]any{}
	for _, r := range rows {
		l, _ := r["labels"].(map[string]any)
		byLabel[fmt.Sprint(l["stress"])] = append(byLabel[fmt.Sprint(l["stress"])], r)
	}
	orphans, norow := 0, 0
	for _, o := range outs {
		rs := byLabel[o.label]
		if o.killed && !o.started && len(rs) == 0 {
			t.Logf("run %s (%s) killed after %v before it started a sandbox: no audit row", o.label, o.prog, o.delay.Round(time.Millisecond))
			norow++
			continue
		}
		if len(rs) != 1 {
			t.Errorf("run %s (%s, killed %v): %d audit rows, want 1", o.label, o.prog, o.killed, len(rs))
			continue
		}
		got := fmt.Sprint(rs[0]["status"])
		want := string(o.status)
		if o.killed {
			want = "killed"
			orphans++
			if r := fmt.Sprint(rs[0]["reason"]); o.err == nil && r != "supervisor died" {
				t.Errorf("run %s (%s): killed supervisor's row has reason %q, want \"supervisor died\"", o.label, o.prog, r)
			}
		}
		if o.err == nil && got != want {
			t.Errorf("run %s (%s): audit row status %q, want %q", o.label, o.prog, got, want)
		}
	}
	if len(rows) != total-norow {
		t.Errorf("audit log has %d rows for %d runs (%d killed before starting a sandbox)", len(rows), total, norow)
	}
	t.Logf("audit: %d rows for %d runs, %d of killed supervisors (finished as killed), %d killed before starting a sandbox", len(rows), total, orphans, norow)
	if v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}}); v.exit != 0 {
		t.Errorf("audit verify: exit %d: %s%s", v.exit, v.stdout, v.stderr)
	}
}

// lineDiff returns the lines of a not in b.
func lineDiff(a, b []string) []string {
	in := map[string]bool{}
	for _, l := range b {
		in[l] = true
	}
	var d []string
	for _, l := range a {
		if !in[l] {
			d = append(d, l)
		}
	}
	return d
}

// sortedCounts prints a count map as "a=1 b=2".
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// sortedRSS prints per-program max RSS in MiB.
func sortedRSS(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%.1f ", k, float64(m[k])/1024)
	}
	return strings.TrimSpace(b.String())
}
