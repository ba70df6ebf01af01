package tests

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// The stress suite: many runs of a mix of programs, sequential,
// concurrent, and with the supervisor SIGKILLed at a random moment, while
// the faults of stress_faults_test.go are provoked beside them; afterwards
// nothing may be left on the host (processes of the sandbox uid, run
// cgroups, mounts, run directories, files beside a device in /dev), the
// supervisor stays within its bound, and the audit log holds exactly one
// finished, true row per run that reached it, and verifies.
//
// The mix: ok, error, timeout (each killed within killBound of its
// deadline), memory bomb, output flood, fork bomb, daemonizer, a program
// that aborts (it ends by SIGABRT, not as PID 1 would) and one that
// orphans a child (reaped while the run goes on). A killed supervisor's
// row is checked unfinished right after the kill and finished as killed,
// "supervisor died", by the next run or audit command.
//
// Sizes come from the environment; the defaults are the short CI form
// (under a minute on two cores), `make stress` sets the full ones:
//
//	NSBOX_STRESS_SEQ     sequential runs                   (default 40)
//	NSBOX_STRESS_CONC    concurrent runs                   (default 24)
//	NSBOX_STRESS_PAR     concurrent runs at a time         (default 8)
//	NSBOX_STRESS_KILLS   runs whose supervisor is killed   (default 5)
//	NSBOX_STRESS_FAULTS  rounds of the faults              (default 2)
//	NSBOX_STRESS_BUILDS  rootfs builds killed and redone   (default 1)
//
// Every payload is bounded: the memory bomb stops at 1 GiB, the floods at
// 64 MiB a stream, the fork bomb at 200 children that sleep 2 s, the
// daemons live 10 s at most.

// stressProg is one kind of program in the mix.
type stressProg struct {
	name   string
	policy string   // path or built-in name, used as is
	extra  []string // flags before -c
	code   string
	want   result.Status
	// timeout, when set, is the run's --timeout: its kill must take
	// effect within killBound of the deadline (told by --trace-phases).
	timeout time.Duration
	// check, when set, says what else is wrong with a result of want.
	check func(res *result.Result, exit int) string
	// hwm bounds the supervisor's own peak RSS in KiB (0: stressHWM).
	hwm int64
}

// stressHWM is the supervisor's peak RSS bound (KiB) for a run whose
// output cap is small.
const stressHWM = 64 << 10

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
		{name: "timeout", policy: "strict", extra: []string{"--timeout", "300ms", "--trace-phases"}, code: "while True: pass",
			want: result.StatusTimeout, timeout: 300 * time.Millisecond},
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
		{name: "abort", policy: strict, code: "import os; os.abort()", want: result.StatusError,
			check: func(res *result.Result, exit int) string {
				if res.Signal == nil || *res.Signal != int(syscall.SIGABRT) || res.ExitCode != nil || exit != 128+int(syscall.SIGABRT) {
					return fmt.Sprintf("signal %s, exit_code %s, exit %d; want SIGABRT, exit 134", ptr(res.Signal), ptr(res.ExitCode), exit)
				}
				return ""
			}},
		{name: "orphan", policy: def, code: orphanCode, want: result.StatusOK,
			check: func(res *result.Result, exit int) string {
				if !strings.Contains(res.Stdout, "ORPHAN gone PPID 1") {
					return fmt.Sprintf("the orphan was not reaped while the run went on: %q", res.Stdout)
				}
				return ""
			}},
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

	id string // the result's run id ("" without a result)
	// noRow: the run must have no row in the suite's log (it was refused
	// before it had one, or recorded elsewhere); rowOptional: it may have
	// one or none (refused before or after opening the log).
	noRow, rowOptional bool
	rowReason          string        // what the row's reason must contain
	told               string        // the reason the result told: the row's must start it
	timed              bool          // a timeout run: late is known
	late               time.Duration // how late after its deadline it was killed
	hwmBound           int64         // the bound of hwm, KiB
}

// stressRun runs prog once with --json into the shared state dir and audit
// log, labelled; with kill >= 0 it SIGKILLs the supervisor after kill.
// Failures come back in err (it is called from many goroutines).
func stressRun(state, db, label string, p stressProg, kill time.Duration) stressOut {
	out := stressOut{label: label, prog: p.name, hwmBound: cmp.Or(p.hwm, stressHWM)}
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
	out.status, out.id, out.told = res.Status, res.ID, toldReason(&res)
	want := p.want
	if kill >= 0 {
		want = result.StatusOK // a kill that came too late: the run just finished
	}
	if res.Status != want {
		out.err = fmt.Errorf("status %q (reason %q, error %+v, exit_code %s, signal %s), want %q\nstdout: %.500s\nstderr: %.2000s",
			res.Status, res.Reason, res.Error, ptr(res.ExitCode), ptr(res.Signal), want, res.Stdout, res.Stderr)
		return out
	}
	if p.timeout > 0 && res.Status == result.StatusTimeout {
		late, why := killLateness(&res, p.timeout)
		out.timed, out.late = why == "", late
		if why != "" {
			out.err = errors.New(why)
		} else if late > killBound {
			out.err = fmt.Errorf("killed %v after its %v deadline, want at most %v", late.Round(time.Millisecond), p.timeout, killBound)
		}
	}
	if p.check != nil && kill < 0 && out.err == nil {
		if why := p.check(&res, ps.ExitCode()); why != "" {
			out.err = errors.New(why)
		}
	}
	if out.err == nil && (strings.Contains(stderr.String(), "chown") || res.Error != nil && strings.Contains(res.Error.Message, "chown")) {
		out.err = fmt.Errorf("a message advises chown: %+v %.500s", res.Error, stderr.Bytes())
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
	mustHave(t, "python3")             // the audit log's lock holder
	mustHave(t, "/usr/bin/python3.11") // the roots the faults rebuild
	nSeq := stressEnv(t, "NSBOX_STRESS_SEQ", 40)
	nConc := stressEnv(t, "NSBOX_STRESS_CONC", 24)
	par := max(stressEnv(t, "NSBOX_STRESS_PAR", 8), 1)
	nKills := stressEnv(t, "NSBOX_STRESS_KILLS", 5)
	nFaults := stressEnv(t, "NSBOX_STRESS_FAULTS", 2)
	nBuilds := stressEnv(t, "NSBOX_STRESS_BUILDS", 1)

	// The normal runs' state dir, and the faults' (so the checks between
	// normal runs do not count the faults' sandboxes); one audit log.
	state, faultState := t.TempDir(), t.TempDir()
	states := []string{state, faultState}
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

	// 0. The faults: the locked audit log waits its bounded 30 s beside
	// everything; the rounds of the other faults start with the
	// sequential runs, the rebuilds with the concurrent ones.
	waitLocked := stressLockedAudit(t, faultState, record)
	faults := newStressFaults(t, faultState, db, record)
	var faultsWG sync.WaitGroup
	var faultRounds, rebuilds time.Duration
	faultsWG.Add(1)
	go func() {
		defer faultsWG.Done()
		t0 := time.Now()
		for i := range nFaults {
			faults.round(i)
		}
		faultRounds = time.Since(t0)
	}()

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
	faultsWG.Add(1)
	go func(t0 time.Time) {
		defer faultsWG.Done()
		if nBuilds > 0 {
			faults.stressRebuilds(nBuilds)
		}
		rebuilds = time.Since(t0)
	}(t0)
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
	// The kills below check who finishes their rows: nothing else may
	// write to the log meanwhile.
	faultsWG.Wait()

	// 3. Killed supervisors: SIGKILL at a random moment in the first
	// 1.5 s; the sandbox must die with its supervisor (PDEATHSIG), and
	// the next run in the state dir sweeps what the dead one left. The
	// row stays unfinished until the next run or audit command finishes
	// it as killed, "supervisor died".
	finishers := []string{"run", "list", "stats", "export", "verify"}
	t0 = time.Now()
	for i := range nKills {
		delay := time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))
		o := stressRun(state, db, fmt.Sprintf("kill-%d", i), killMix[i%len(killMix)], delay)
		record(o)
		if left := waitNoSandboxProcesses(t, state, 2*time.Second); len(left) > 0 {
			t.Errorf("killed run %d (%s, SIGKILL after %v): processes of the sandbox uid alive 2 s later: %s", i, o.prog, delay.Round(time.Millisecond), describe(left))
			killSandboxProcesses(left)
		}
		if o.killed {
			stressFinishKilled(t, state, db, o, finishers[i%len(finishers)], mix[0], record)
		}
	}
	phase["kills"] = time.Since(t0)
	waitLocked()
	wall := time.Since(start)

	// A final normal run in the state dir sweeps the killed runs' leftovers.
	fin := stressRun(state, db, "final", mix[0], -1)
	record(fin)

	// Leftovers on the host.
	for _, st := range states {
		if left := waitNoSandboxProcesses(t, st, 2*time.Second); len(left) > 0 {
			t.Errorf("processes of the sandbox uid left (state %s): %s", st, describe(left))
			killSandboxProcesses(left)
		}
		if ours, _ := stressCgroups(t, st); len(ours) > 0 {
			t.Errorf("run cgroups left (state %s): %v", st, ours)
		}
	}
	othersAfter := 0
	for _, cg := range runCgroups(t) {
		if b := filepath.Base(cg); !strings.HasPrefix(b, stressCgroupPrefix(state)) && !strings.HasPrefix(b, stressCgroupPrefix(faultState)) {
			othersAfter++
		}
	}
	if len(otherCgroups)+othersAfter > 0 {
		t.Logf("note: run cgroups of other state dirs (not counted): %d before, %d after", len(otherCgroups), othersAfter)
	}
	mountsAfter := mountinfo(t)
	if len(mountsAfter) != len(mountsBefore) {
		t.Errorf("mount table had %d lines before, %d after; added %q, removed %q", len(mountsBefore), len(mountsAfter),
			lineDiff(mountsAfter, mountsBefore), lineDiff(mountsBefore, mountsAfter))
	}
	for _, st := range states {
		for _, l := range mountsAfter {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], st) {
				t.Errorf("mount left under the state dir: %s", l)
			}
		}
		if entries, err := os.ReadDir(filepath.Join(st, "runs")); err == nil {
			for _, e := range entries {
				t.Errorf("run directory left: %s", filepath.Join(st, "runs", e.Name()))
			}
		}
	}

	// Figures.
	statuses := map[string]int{}
	byProgRSS, byProgHWM, byProgWall := map[string]int64{}, map[string]int64{}, map[string]time.Duration{}
	var maxRSS, maxHWM int64
	var maxRSSRun, maxHWMRun string
	var late []time.Duration
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
		if o.timed {
			late = append(late, o.late)
		}
		if o.hwmBound > 0 && o.hwm > o.hwmBound {
			t.Errorf("run %s (%s): supervisor max RSS %.1f MiB, want at most %.1f MiB", o.label, o.prog, float64(o.hwm)/1024, float64(o.hwmBound)/1024)
		}
		if o.hwmBound == 0 {
			continue // a fault's run: not sampled
		}
		byProgRSS[o.prog] = max(byProgRSS[o.prog], o.maxrss)
		byProgWall[o.prog] = max(byProgWall[o.prog], o.wall)
		byProgHWM[o.prog] = max(byProgHWM[o.prog], o.hwm)
		if o.maxrss > maxRSS {
			maxRSS, maxRSSRun = o.maxrss, o.label+" ("+o.prog+")"
		}
		if o.hwm > maxHWM {
			maxHWM, maxHWMRun = o.hwm, o.label+" ("+o.prog+")"
		}
	}
	total := len(outs)
	t.Logf("runs: %d (sequential %d in %v, concurrent %d at %d in %v, kills %d in %v, final 1, faults %d: %d rounds in %v, %d killed builds in %v); %d supervisors actually killed, %d nsbox failures",
		total, nSeq, phase["sequential"].Round(time.Millisecond), nConc, par, phase["concurrent"].Round(time.Millisecond),
		nKills, phase["kills"].Round(time.Millisecond), total-nSeq-nConc-nKills-1, nFaults, faultRounds.Round(time.Millisecond),
		nBuilds, rebuilds.Round(time.Millisecond), killed, failed)
	t.Logf("wall: %v; sequential %.1f runs/s, concurrent %.1f runs/s (both beside the faults)",
		wall.Round(time.Millisecond), float64(nSeq)/phase["sequential"].Seconds(), float64(nConc)/phase["concurrent"].Seconds())
	t.Logf("statuses: %s", sortedCounts(statuses))
	if len(late) > 0 {
		slices.Sort(late)
		t.Logf("timeout runs: %d, killed after their deadline by median %v, max %v (bound %v)",
			len(late), late[len(late)/2].Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond), killBound)
	}
	t.Logf("supervisor max RSS (its own VmHWM, sampled every 5 ms): %.1f MiB (%s); per program: %s",
		float64(maxHWM)/1024, maxHWMRun, sortedRSS(byProgHWM))
	t.Logf("ru_maxrss of nsbox (includes the sandbox processes it reaped, and this test's own peak, which a child inherits until it execs): max %.1f MiB (%s); per program: %s",
		float64(maxRSS)/1024, maxRSSRun, sortedRSS(byProgRSS))
	t.Logf("longest run per program: %s", sortedDurations(byProgWall))
	if maxHWM == 0 {
		t.Errorf("no VmHWM sample of any supervisor")
	}

	// The audit log: exactly one row per run that reached it, finished
	// with the run's status, or for a killed supervisor as killed, reason
	// "supervisor died"; no row of a run that must have none; no row of
	// no run. A run with a result is found by its id (a refused run's row
	// has no labels), one without by its label.
	rows := auditRows(t, db)
	byLabel, byID := map[string][]map[string]any{}, map[string]map[string]any{}
	for _, r := range rows {
		l, _ := r["labels"].(map[string]any)
		if v, ok := l["stress"]; ok {
			byLabel[fmt.Sprint(v)] = append(byLabel[fmt.Sprint(v)], r)
		}
		byID[fmt.Sprint(r["id"])] = r
	}
	mine := map[string]bool{}
	orphans, norow := 0, 0
	for _, o := range outs {
		rs := byLabel[o.label]
		if o.id != "" {
			rs = nil
			if r, ok := byID[o.id]; ok {
				rs = append(rs, r)
			}
		}
		for _, r := range rs {
			mine[fmt.Sprint(r["id"])] = true
		}
		switch {
		case o.noRow:
			if len(rs) > 0 {
				t.Errorf("run %s (%s): %d audit rows, want none: %v", o.label, o.prog, len(rs), rs)
			}
			norow++
			continue
		case o.killed && !o.started && len(rs) == 0:
			t.Logf("run %s (%s) killed after %v before it started a sandbox: no audit row", o.label, o.prog, o.delay.Round(time.Millisecond))
			norow++
			continue
		case o.rowOptional && len(rs) == 0:
			norow++
			continue
		}
		if len(rs) != 1 {
			t.Errorf("run %s (%s, killed %v): %d audit rows, want 1", o.label, o.prog, o.killed, len(rs))
			continue
		}
		got, reason := fmt.Sprint(rs[0]["status"]), fmt.Sprint(rs[0]["reason"])
		want := string(o.status)
		if o.killed {
			want = "killed"
			orphans++
			if o.err == nil && reason != "supervisor died" {
				t.Errorf("run %s (%s): killed supervisor's row has reason %q, want \"supervisor died\"", o.label, o.prog, reason)
			}
		}
		if o.err == nil && got != want {
			t.Errorf("run %s (%s): audit row status %q, want %q", o.label, o.prog, got, want)
		}
		if o.err == nil && !strings.Contains(reason, o.rowReason) {
			t.Errorf("run %s (%s): audit row reason %q, want it to mention %q", o.label, o.prog, reason, o.rowReason)
		}
		if o.err == nil && o.id != "" && (!strings.HasPrefix(o.told, reason) || (reason == "") != (o.told == "")) {
			t.Errorf("run %s (%s): audit row reason %q, but the result said %q", o.label, o.prog, reason, o.told)
		}
	}
	for _, r := range rows {
		if !mine[fmt.Sprint(r["id"])] {
			t.Errorf("audit row of no run of the suite: %s %s %q, labels %v", r["id"], r["status"], r["reason"], r["labels"])
		}
	}
	t.Logf("audit: %d rows for %d runs, %d of killed supervisors (finished as killed), %d without a row (refused before it, killed before starting a sandbox, or recorded elsewhere)",
		len(rows), total, orphans, norow)
	if v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}}); v.exit != 0 {
		t.Errorf("audit verify: exit %d: %s%s", v.exit, v.stdout, v.stderr)
	}
}

// toldReason is why the run ended as its result tells it, in the form the
// audit row keeps: the reason, or for a sandbox error its step and message
// (to which nsbox may add a hint for the caller after the row is written).
func toldReason(res *result.Result) string {
	if res.Reason == "" && res.Error != nil {
		return res.Error.Step + ": " + res.Error.Message
	}
	return res.Reason
}

// stressFinishKilled checks the row of a run whose supervisor the suite
// killed: unfinished right after the kill (nobody else writes to the log
// then), and finished as killed, reason "supervisor died", once finisher
// ran: "run" (the next run, p) or an audit subcommand.
func stressFinishKilled(t *testing.T, state, db string, o stressOut, finisher string, p stressProg, record func(stressOut)) {
	t.Helper()
	id := rawRunLabelled(t, db, o.label)
	if id == "" {
		return // killed before its row; the final checks judge that
	}
	if r := rawRuns(t, db)[id]; r.status != "unfinished" || r.seq.Valid {
		t.Errorf("run %s (%s): its row right after the kill: %+v, want unfinished", o.label, o.prog, r)
		return
	}
	if finisher == "run" {
		record(stressRun(state, db, o.label+"-next", p, -1))
	} else {
		a := nsbox(t, run{args: []string{"audit", finisher, "--audit-db", db}})
		if a.exit != 0 || !strings.Contains(string(a.stderr), "1 unfinished run(s) whose supervisor died are now finished as killed") {
			t.Errorf("audit %s after the kill of %s: exit %d, stderr %q; want it to finish the row", finisher, o.label, a.exit, a.stderr)
		}
	}
	if r := rawRuns(t, db)[id]; r.status != "killed" || r.reason != "supervisor died" || !r.seq.Valid {
		t.Errorf("run %s (%s): its row after %s: %+v, want killed, reason \"supervisor died\", chained", o.label, o.prog, finisher, r)
	}
}

// rawRunLabelled returns the id of the row labelled stress=label, read
// straight from the database, or "" when there is none.
func rawRunLabelled(t *testing.T, db, label string) string {
	t.Helper()
	sqldb, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	var id string
	err = sqldb.QueryRow(`SELECT run_id FROM run_labels WHERE key = 'stress' AND value = ?`, label).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("read the row of %s: %v", label, err)
	}
	return id
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

// sortedDurations prints per-program durations.
func sortedDurations(m map[string]time.Duration) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%v ", k, m[k].Round(time.Millisecond))
	}
	return strings.TrimSpace(b.String())
}
