package tests

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
)

// Warm sandboxes: a sandbox started before its program (the service's
// pool, a session) imports the policy's allowlist.preload while it waits.

// needDatasci skips a test without the datasci root (make datasci).
func needDatasci(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(rootsDir(), "datasci", ".nsbox")); err != nil {
		mustwork.Skip(t, "datasci root not built (make datasci): %v", err)
	}
}

// warmPlan makes a session's plan as the planner makes a warm sandbox's:
// the runner imports the policy's preload before the first cell.
func warmPlan(t *testing.T, policy string) func(*plan.Plan) {
	t.Helper()
	pol, err := policies.Resolve(policy)
	if err != nil {
		t.Fatal(err)
	}
	return func(pl *plan.Plan) { pl.Runner.Preload = pol.Allowlist.Preload }
}

// TestPreloadDoesNotWiden: a warm datasci session finds numpy, pandas
// and pyplot loaded before its first cell imports anything, and a module
// that preloading loaded along (pandas imports pickle) but the allowlist
// does not allow stays refused to the program, by the static check and
// at run time; a cold run ignores the preload.
func TestPreloadDoesNotWiden(t *testing.T) {
	needDatasci(t)
	e := newSessionEnv(t)
	s := e.open(t, "datasci", 0, warmPlan(t, "datasci"))
	r := cell(t, s, "import sys\nprint(sorted(m for m in ('matplotlib.pyplot', 'numpy', 'pandas', 'pickle') if m in sys.modules))", 0, result.StatusOK)
	if want := "['matplotlib.pyplot', 'numpy', 'pandas', 'pickle']\n"; r.Stdout != want {
		t.Fatalf("preloaded: %q, want %q", r.Stdout, want)
	}
	r = cell(t, s, "import pickle", 0, result.StatusPolicyViolation)
	if len(r.Violations) == 0 || !strings.Contains(r.Violations[0].Detail+r.Violations[0].Name, "pickle") {
		t.Errorf("import pickle: violations %+v", r.Violations)
	}
	r, err := s.Run(t.Context(), []byte("m = __import__('pick' + 'le')\nprint(m.dumps(1))"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status == result.StatusOK || strings.Contains(r.Stdout, "\\x80") || len(r.Violations) == 0 {
		t.Errorf("__import__ of a preloaded, refused module: status %q, stdout %q, violations %+v", r.Status, r.Stdout, r.Violations)
	}
	cell(t, s, "import pandas as pd\nprint(len(pd.DataFrame({'x': range(3)})))", 0, result.StatusOK)

	o := runPyLayer(t, "datasci", "import sys\nprint('pandas' in sys.modules)")
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "False\n" {
		t.Errorf("a cold run preloaded: %q", o.res.Stdout)
	}
	s.Close()
	e.noLeftovers(t)
}

// warmIDs waits until at least n sandboxes wait in the service's pools
// (their run directories, named by the run id the run that takes one
// gets) and returns their ids.
func warmIDs(t *testing.T, s *served, n int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(s.state, "runs"))
		var ids []string
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				ids = append(ids, e.Name())
			}
		}
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes waiting after 60s, want %d\n%s", len(ids), n, s.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poolReady waits until the run pool of policy has n sandboxes ready
// (nsbox_pool_waiting in /v1/metrics).
func poolReady(t *testing.T, s *served, policy string, n int) {
	t.Helper()
	gaugeAtLeast(t, s, "nsbox_pool_waiting", policy, n)
}

// sessionPoolReady waits until n sessions of policy wait in its pool.
func sessionPoolReady(t *testing.T, s *served, policy string, n int) {
	t.Helper()
	gaugeAtLeast(t, s, "nsbox_session_pool_waiting", policy, n)
}

// gaugeAtLeast waits until the metric's gauge for policy reaches n.
func gaugeAtLeast(t *testing.T, s *served, metric, policy string, n int) {
	t.Helper()
	key := fmt.Sprintf("%s{policy=%q} ", metric, policy)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, b := s.get(t, "/v1/metrics")
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, key); ok {
				var got int
				if fmt.Sscan(v, &got); got >= n {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{policy=%q} has not reached %d after 60s\n%s\n%s", metric, policy, n, b, s.logText())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pooledRun waits for a warm sandbox, runs code through the service and
// checks that the run took one of the sandboxes that waited.
func pooledRun(t *testing.T, s *served, req map[string]any) *result.Result {
	t.Helper()
	poolReady(t, s, req["policy"].(string), 1)
	warm := warmIDs(t, s, 1)
	st, r, body := s.run(t, req)
	if st != 200 {
		t.Fatalf("POST /v1/runs: %d %s", st, body)
	}
	if !slices.Contains(warm, r.ID) {
		t.Fatalf("run %s did not take a waiting sandbox (%v)", r.ID, warm)
	}
	return r
}

// poolPolicy writes a policy file for a test and returns its path.
func poolPolicy(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pooled.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPoolRun: one-shot runs through the service take sandboxes started
// ahead with the policy's preload imported: the time a sandbox waited
// (longer than the policy's timeout) does not count against its run, the
// timeout still holds from when the program is sent, a module loaded
// along by the preload (asyncio loads subprocess) stays refused to the
// program, a run that narrows a limit is built cold (nothing preloaded),
// every run is one audit row, and the drain tears the waiting sandboxes
// down.
func TestPoolRun(t *testing.T) {
	needRoot(t)
	pol := poolPolicy(t, "extends = \"default\"\n[limits]\ntimeout = \"2s\"\n[allowlist]\npreload = [\"asyncio\"]\n")
	s := startServe(t, "", "--policies", pol, "--pool", "2")
	s.ready(t)
	warmIDs(t, s, 2)
	time.Sleep(2500 * time.Millisecond) // longer than the timeout

	probe := "import sys\nprint('asyncio' in sys.modules, 'subprocess' in sys.modules)"
	r := pooledRun(t, s, map[string]any{"code": probe, "policy": pol})
	if r.Status != result.StatusOK || r.Stdout != "True True\n" {
		t.Fatalf("pooled run: %s %q %q %+v", r.Status, r.Stdout, r.Stderr, r.Error)
	}
	r = pooledRun(t, s, map[string]any{"code": "import subprocess\nprint('ran')", "policy": pol})
	if r.Status != result.StatusPolicyViolation || r.Stdout != "" {
		t.Errorf("import subprocess, preloaded: %s %q", r.Status, r.Stdout)
	}
	r = pooledRun(t, s, map[string]any{"code": "m = __import__('sub' + 'process')\nprint('ran')", "policy": pol})
	if r.Status == result.StatusOK || r.Stdout != "" || len(r.Violations) == 0 || r.Violations[0].Name != "subprocess" {
		t.Errorf("__import__ of subprocess, preloaded: %s %q %+v", r.Status, r.Stdout, r.Violations)
	}
	r = pooledRun(t, s, map[string]any{"code": "while True:\n    pass", "policy": pol})
	if r.Status != result.StatusTimeout || r.DurationMS < 1900 || r.DurationMS > 10000 {
		t.Errorf("a loop in a pooled sandbox: %s after %d ms (%s)", r.Status, r.DurationMS, r.Reason)
	}
	st, cold, body := s.run(t, map[string]any{"code": probe, "policy": pol, "timeout": 1.5})
	if st != 200 || cold.Status != result.StatusOK || cold.Stdout != "False False\n" {
		t.Fatalf("a run that narrows the timeout: %d %s", st, body)
	}

	rows := auditRows(t, s.db)
	if len(rows) != 5 {
		t.Errorf("%d audit rows, want 5: %v", len(rows), rows)
	}
	for _, row := range rows {
		if row["status"] == nil || row["status"] == "running" {
			t.Errorf("unfinished row: %v", row)
		}
	}
	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM\n%s", code, s.logText())
	}
	s.nothingLeft(t)
}

// TestPoolKilled: a SIGKILLed service leaves none of its waiting
// sandboxes running (each init dies with the thread that started it),
// and the next start removes what they left on disk.
func TestPoolKilled(t *testing.T) {
	needRoot(t)
	state := t.TempDir()
	s := startServe(t, state, "--policies", "strict,default", "--pool", "2")
	s.ready(t)
	warmIDs(t, s, 4)
	if len(sandboxProcesses(t)) == 0 {
		t.Fatal("no sandbox process while 4 sandboxes wait")
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	deadline := time.Now().Add(2 * time.Second)
	for len(sandboxProcesses(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := sandboxProcesses(t); len(p) > 0 {
		t.Fatalf("waiting sandboxes outlived the killed service: %v", p)
	}
	s2 := startServe(t, state, "--policies", "strict", "--pool", "0")
	s2.ready(t)
	if _, r, body := s2.run(t, map[string]any{"code": "print(1)", "policy": "strict"}); r == nil || r.Status != result.StatusOK {
		t.Fatalf("a run after the restart: %s", body)
	}
	if rows := auditRows(t, s2.db); len(rows) != 1 {
		t.Errorf("audit rows %v: the waiting sandboxes ran nothing and have none", rows)
	}
	s2.stopAndWait(t)
	// A supervisor the kill caught between creating its run directory
	// (runs/.new-ID) and locking it leaves that directory to the sweep of
	// a run a minute later (docs/running.md, state directory): not a leak
	// of the restart's.
	if left, _ := filepath.Glob(filepath.Join(state, "runs", ".new-*")); len(left) > 0 {
		t.Logf("set up when the service was killed, swept a minute later: %v", left)
		for _, d := range left {
			os.RemoveAll(d)
		}
	}
	s2.nothingLeft(t)
}

// poolBypass are the strict policy's cases of sandbox/pyrunner's bypass
// suite (bypass_test.go), as programs for the service: each must end
// with the status and the first violation given, and print nothing.
var poolBypass = []struct {
	name, prog string
	status     result.Status
	violation  string // the name of a violation the result must hold
}{
	{"import os", "import os\nos.system('true')", result.StatusPolicyViolation, "os"},
	{"from os import path", "from os import path", result.StatusPolicyViolation, "os"},
	{"relative import", "from . import x", result.StatusPolicyViolation, "."},
	{"__import__ literal", "__import__('os')", result.StatusPolicyViolation, "__import__"},
	{"importlib folded name", "import importlib\nimportlib.import_module('o' + 's')", result.StatusPolicyViolation, "importlib"},
	{"exec string", "exec('import os')", result.StatusPolicyViolation, "exec"},
	{"getattr on __builtins__", "getattr(__builtins__, '__imp' + 'ort__')('os')", result.StatusPolicyViolation, "getattr"},
	{"__builtins__ subscript", "__builtins__['__import__']('os')", result.StatusPolicyViolation, "__builtins__"},
	{"sys.modules", "import sys\nsys.modules['os'].system('true')", result.StatusPolicyViolation, "sys"},
	{"subclass walk", "().__class__.__bases__[0].__subclasses__()", result.StatusPolicyViolation, "__subclasses__"},
	{"random._os", "import random\nrandom._os.system('true')", result.StatusPolicyViolation, "_os"},
	{"from random import _os", "from random import _os", result.StatusPolicyViolation, "_os"},
	{"match class pattern", "match ():\n    case tuple(__class__=c):\n        pass", result.StatusPolicyViolation, "match"}, // restricted: no match at all
	{"vars and globals", "vars()['x'] = 1\nglobals()", result.StatusPolicyViolation, "vars"},
	{"json.codecs.sys", "import json\nx = json.codecs.sys\nprint('ran')", result.StatusPolicyViolation, "codecs"},
	{"from json import codecs", "from json import codecs\nprint('ran')", result.StatusPolicyViolation, "codecs"},
	{"module is read-only", "import json\njson.loads = print\nprint('ran')", result.StatusPolicyViolation, "json.loads"},
	{"generator frame", "def g():\n    yield 1\nx = g()\nf = x.gi_frame\nprint('ran')", result.StatusPolicyViolation, "gi_frame"},
	{"attrgetter computed", "import operator, random\noperator.attrgetter('_' + 'os')(random)\nprint('ran')", result.StatusPolicyViolation, "_os"},
	{"Formatter field", "import string, random\nstring.Formatter().get_field('0._os', [random], {})\nprint('ran')", result.StatusPolicyViolation, "_os"},
	{"typing string annotation", "import typing\nclass A:\n    x: '().__class__.__base__.__subclasses__()'\ntyping.get_type_hints(A)\nprint('ran')", result.StatusPolicyViolation, "__subclasses__"},
}

// TestPoolBypass: the strict cases of the bypass suite against pooled
// sandboxes whose runner preloaded the modules the cases reach through
// (json, random, string, typing, operator): each ends as in a cold run.
func TestPoolBypass(t *testing.T) {
	needRoot(t)
	pol := poolPolicy(t, "extends = \"strict\"\n[allowlist]\npreload = [\"json\", \"operator\", \"random\", \"string\", \"typing\"]\n")
	s := startServe(t, "", "--policies", pol, "--pool", "2")
	s.ready(t)
	for _, tc := range poolBypass {
		r := pooledRun(t, s, map[string]any{"code": tc.prog, "policy": pol})
		var names []string
		for _, v := range r.Violations {
			names = append(names, v.Name)
		}
		if r.Status != tc.status || r.Stdout != "" || !slices.Contains(names, tc.violation) {
			t.Errorf("%s: status %s, stdout %q, violations %v; want %s with %q", tc.name, r.Status, r.Stdout, names, tc.status, tc.violation)
		}
		// The same program cold: the same end.
		_, cold, body := s.run(t, map[string]any{"code": tc.prog, "policy": pol, "timeout": 9})
		if cold == nil || cold.Status != r.Status || fmt.Sprint(cold.Violations) != fmt.Sprint(r.Violations) {
			t.Errorf("%s: cold %s, pooled %s %v", tc.name, body, r.Status, r.Violations)
		}
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

// TestPoolSession: a new session takes a session opened ahead, its
// interpreter waiting with the preload imported: the request's labels
// go on its cells' rows, a module loaded along stays refused, and a
// session that narrows timeout_per_cell is opened cold (and preloads
// too: every session is started before its first cell).
func TestPoolSession(t *testing.T) {
	needRoot(t)
	pol := poolPolicy(t, "extends = \"default\"\n[allowlist]\npreload = [\"asyncio\"]\n")
	s := startServe(t, "", "--policies", pol, "--pool", "1")
	s.ready(t)
	poolReady(t, s, pol, 1)
	sessionPoolReady(t, s, pol, 1)
	warm := warmIDs(t, s, 2) // one run, one session
	var created struct{ ID string }
	req := map[string]any{"policy": pol, "labels": map[string]string{"job": "pooled"}}
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", req, &created); st != 201 || !slices.Contains(warm, created.ID) {
		t.Fatalf("POST /v1/sessions: %d %s; want one of the waiting %v", st, b, warm)
	}
	probe := "import sys\nprint('asyncio' in sys.modules, 'subprocess' in sys.modules)"
	if r := s.cell(t, created.ID, probe); r.Status != result.StatusOK || r.Stdout != "True True\n" {
		t.Errorf("pooled session: %s %q %q", r.Status, r.Stdout, r.Stderr)
	}
	if r := s.cell(t, created.ID, "import subprocess"); r.Status != result.StatusPolicyViolation {
		t.Errorf("import subprocess in a pooled session: %s", r.Status)
	}
	before := warmIDs(t, s, 1)
	var cold struct{ ID string }
	req["timeout_per_cell"] = 5
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", req, &cold); st != 201 || slices.Contains(before, cold.ID) {
		t.Fatalf("POST /v1/sessions narrowing: %d %s; want a cold session", st, b)
	}
	if r := s.cell(t, cold.ID, probe); r.Status != result.StatusOK || r.Stdout != "True True\n" {
		t.Errorf("cold session: %s %q", r.Status, r.Stdout)
	}
	labelled := 0
	for _, row := range auditRows(t, s.db) {
		if l, ok := row["labels"].(map[string]any); ok && l["job"] == "pooled" && (l["session"] == created.ID || l["session"] == cold.ID) {
			labelled++
		}
	}
	if labelled != 3 {
		t.Errorf("%d cell rows with the request's labels, want 3", labelled)
	}
	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM\n%s", code, s.logText())
	}
	s.nothingLeft(t)
}

// TestPoolCountsReadySandboxes checks that a pooled sandbox counts as
// waiting only once its runner has imported the policy's preload and
// waits for its program (the runner's ready line): when the gauge first
// says one is ready, its interpreter is blocked reading the program on
// stdin, not still importing datasci's pandas and pyplot.
func TestPoolCountsReadySandboxes(t *testing.T) {
	needRoot(t)
	needDatasci(t)
	s := startServe(t, "", "--policies", "datasci", "--pool", "1")
	s.ready(t)
	poolReady(t, s, "datasci", 1)
	// A moment for the runner to get from its ready line into read(2):
	// far less than the preload takes.
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		var seen []string
		for _, pid := range descendants(s.cmd.Process.Pid) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if !strings.HasPrefix(string(comm), "python") {
				continue
			}
			// /proc/PID/syscall: the number and arguments of the call
			// the process is blocked in; read(2) is 0 on x86-64, and
			// its first argument the descriptor.
			sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
			if f := strings.Fields(string(sc)); len(f) > 1 && f[0] == "0" && f[1] == "0x0" {
				return
			}
			seen = append(seen, fmt.Sprintf("%d: %s", pid, strings.TrimSpace(string(sc))))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool counts a datasci sandbox whose interpreter is not waiting for its program on stdin: %v", seen)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPooledRunEnds checks how pooled runs end, the early end included
// (a run answered while its program's process is still exiting,
// sandbox/supervisor/early.go): every exit status and output is the one
// the program's end gives, a death by signal is reported as such, a
// program whose child outlives it still ends with the child killed, and
// the reaper's own report agrees with every early answer (the teardown
// logs a difference).
func TestPooledRunEnds(t *testing.T) {
	needRoot(t)
	pol := poolPolicy(t, "extends = \"permissive\"\n")
	s := startServe(t, "", "--policies", pol, "--pool", "1")
	s.ready(t)
	for _, tc := range []struct {
		name, code string
		status     result.Status
		exit, sig  int // -1: none
		stdout     string
	}{
		{"ok", "print('out')", result.StatusOK, 0, -1, "out\n"},
		{"exit 3", "print('bye')\nraise SystemExit(3)", result.StatusError, 3, -1, "bye\n"},
		{"exception", "print('x', end='')\n1/0", result.StatusError, 1, -1, "x"},
		{"abort", "import os\nprint('before', flush=True)\nos.abort()", result.StatusError, -1, 6, "before\n"},
		{"child holds stdout", "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\nprint('parent')", result.StatusOK, 0, -1, "parent\n"},
		{"many", "for i in range(20000):\n    print(i)", result.StatusOK, 0, -1, ""},
	} {
		r := pooledRun(t, s, map[string]any{"policy": pol, "code": tc.code})
		switch {
		case r.Status != tc.status:
			t.Errorf("%s: status %s, want %s (%s)", tc.name, r.Status, tc.status, r.Reason)
		case tc.exit >= 0 && (r.ExitCode == nil || *r.ExitCode != tc.exit):
			t.Errorf("%s: exit code %v, want %d", tc.name, r.ExitCode, tc.exit)
		case tc.sig >= 0 && (r.Signal == nil || *r.Signal != tc.sig):
			t.Errorf("%s: signal %v, want %d", tc.name, r.Signal, tc.sig)
		case tc.stdout != "" && r.Stdout != tc.stdout:
			t.Errorf("%s: stdout %q, want %q", tc.name, r.Stdout, tc.stdout)
		case tc.name == "many" && !strings.HasSuffix(r.Stdout, "19999\n"):
			t.Errorf("%s: stdout ends %q", tc.name, r.Stdout[max(0, len(r.Stdout)-20):])
		}
	}
	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("nsbox serve exited %d", code)
	}
	if log := s.logText(); strings.Contains(log, "teardown after the answer") {
		t.Errorf("a teardown failed after its answer:\n%s", log)
	}
}

// TestRunOutputs: a one-shot run through the service returns its display
// outputs as a session's cell does (a final bare expression's value, a
// figure left open as a PNG that decodes), pooled or cold, and a run
// whose last statement is not an expression has none.
func TestRunOutputs(t *testing.T) {
	needRoot(t)
	needDatasci(t)
	s := startServe(t, "", "--policies", "datasci", "--pool", "1")
	s.ready(t)
	code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n6 * 7"
	check := func(how string, r *result.Result) {
		t.Helper()
		if r.Status != result.StatusOK {
			t.Fatalf("%s: %s %s %q", how, r.Status, r.Reason, r.Stderr)
		}
		var text, png bool
		for _, o := range r.Outputs {
			switch o.Type {
			case result.OutputText:
				text = text || o.Data == "42"
			case result.OutputPNG:
				b, err := base64.StdEncoding.DecodeString(o.Data)
				png = png || err == nil && bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n"))
			}
		}
		if !text || !png {
			t.Errorf("%s: outputs %d, the value 42 %v, a PNG %v", how, len(r.Outputs), text, png)
		}
	}
	check("pooled", pooledRun(t, s, map[string]any{"policy": "datasci", "code": code}))
	st, cold, body := s.run(t, map[string]any{"policy": "datasci", "code": code, "timeout": 60})
	if st != 200 {
		t.Fatalf("cold run: %d %s", st, body)
	}
	check("cold", cold)
	if r := pooledRun(t, s, map[string]any{"policy": "datasci", "code": "x = 6 * 7"}); len(r.Outputs) != 0 {
		t.Errorf("a run ending in an assignment has outputs: %v", r.Outputs)
	}
}
