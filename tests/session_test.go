package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/session"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// Sessions are driven from this process (package session, as the
// service drives them), with the binary under test as the sandbox's
// init: the same init, root and runner as nsbox run's.

// sessionEnv is where a test's sessions keep their state and audit rows.
type sessionEnv struct {
	state, auditDB string
	mu             sync.Mutex
	ids            []string // of the sessions opened
}

// newSessionEnv makes a fresh state directory, with the base root built
// (a first nsbox run builds it when it is missing).
func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	needRoot(t)
	e := &sessionEnv{state: t.TempDir()}
	e.auditDB = filepath.Join(e.state, "audit.db")
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", "strict", "-c", "pass"}, state: e.state})
	o.wantStatus(t, result.StatusOK)
	return e
}

// sessionInit is the init a session starts: nsbox-init beside the binary
// under test when make build put one there, else the binary itself.
func sessionInit() string {
	if p := filepath.Join(filepath.Dir(nsboxBin), supervisor.InitBinary); fileExists(p) {
		return p
	}
	return nsboxBin
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// open starts a session under policy (a built-in name or a file) with
// change applied to its plan.
func (e *sessionEnv) open(t *testing.T, policy string, idle time.Duration, change func(*plan.Plan)) *session.Session {
	t.Helper()
	pol, err := policies.Resolve(policy)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.Make(pol, planner.Flags{}, plan.ReadHost(pol.Sandbox.Require))
	if err != nil {
		t.Fatal(err)
	}
	pl.Runner.Mode, pl.Runner.Outputs = pyrunner.ModeSession, true
	if change != nil {
		change(pl)
	}
	s, err := session.Open(context.Background(), session.Options{
		Plan: pl, StateDir: e.state, Exe: sessionInit(), AuditDB: e.auditDB,
		Labels: map[string]string{"test": t.Name()}, IdleTimeout: idle,
	})
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	e.mu.Lock()
	e.ids = append(e.ids, s.ID())
	e.mu.Unlock()
	return s
}

// noLeftovers checks that no run directory, cgroup or sandbox process of
// the env's sessions is left.
func (e *sessionEnv) noLeftovers(t *testing.T) {
	t.Helper()
	(&outcome{state: e.state}).noLeftovers(t)
	for _, cg := range runCgroups(t) {
		for _, id := range e.ids {
			if strings.HasSuffix(cg, "-"+id) {
				t.Errorf("cgroup left: %s", cg)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(sandboxProcesses(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range sandboxProcesses(t) {
		status, _ := os.ReadFile(filepath.Join("/proc", pid, "status"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		t.Errorf("sandbox process left: %s %q\n%s", pid, cmdline, status)
	}
}

// cell runs code and fails the test unless the cell ends with status.
func cell(t *testing.T, s *session.Session, code string, timeout time.Duration, status result.Status) *result.Result {
	t.Helper()
	r, err := s.Run(context.Background(), []byte(code), timeout)
	if err != nil {
		t.Fatalf("cell %q: %v", code, err)
	}
	if r.Status != status {
		t.Fatalf("cell %q: status %q (reason %q, error %+v, exit %s), want %q\nstdout: %s\nstderr: %s",
			code, r.Status, r.Reason, r.Error, ptr(r.ExitCode), status, r.Stdout, r.Stderr)
	}
	return r
}

// TestSessionState: variables, functions, imports and open files persist
// across cells; each cell's stdout and stderr hold its own output only;
// a final expression comes back as a display output; an exception is
// the cell's, and the session goes on; every cell is an audit row
// labelled with the session and its number.
func TestSessionState(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, "default", 0, nil)
	cell(t, s, "import math\nx = 41\ndef f(v):\n    return v + 1\nlog = open('/workspace/log', 'w')\nprint('one')", 0, result.StatusOK)
	r := cell(t, s, "import sys\nprint(f(x)); print('two-err', file=sys.stderr)\nlog.write('kept'); log.flush()", 0, result.StatusOK)
	if r.Stdout != "42\n" || r.Stderr != "two-err\n" {
		t.Errorf("cell 2: stdout %q stderr %q; want only its own output", r.Stdout, r.Stderr)
	}
	r = cell(t, s, "math.floor(x / 2)", 0, result.StatusOK)
	if len(r.Outputs) != 1 || r.Outputs[0] != (result.Output{Type: result.OutputText, Data: "20"}) {
		t.Errorf("cell 3 outputs %+v; want text/plain 20", r.Outputs)
	}
	r = cell(t, s, "1/0", 0, result.StatusError)
	if r.Exception == nil || r.Exception.Name != "ZeroDivisionError" || !strings.Contains(r.Stderr, "ZeroDivisionError") {
		t.Errorf("cell 4: exception %+v, stderr %q", r.Exception, r.Stderr)
	}
	r = cell(t, s, "import socket", 0, result.StatusPolicyViolation)
	if len(r.Violations) == 0 || r.Violations[0].Name != "socket" {
		t.Errorf("cell 5 violations %+v", r.Violations)
	}
	cell(t, s, "print(open('/workspace/log').read())", 0, result.StatusOK)
	if r.ID == s.ID() || r.Policy != "default" || r.Limits == nil || r.CPUMS == nil || r.PeakMemoryBytes == nil {
		t.Errorf("cell result: id %s (session %s), policy %q, limits %v, cpu %v, peak %v", r.ID, s.ID(), r.Policy, r.Limits, r.CPUMS, r.PeakMemoryBytes)
	}
	final := s.Close()
	if final.Status != result.StatusOK || final.ID != s.ID() {
		t.Errorf("session result: %s %q (id %s)", final.Status, final.Reason, final.ID)
	}
	if _, err := s.Run(context.Background(), []byte("x"), 0); !errors.Is(err, session.ErrClosed) {
		t.Errorf("a cell after Close: %v; want ErrClosed", err)
	}

	db, err := audit.Open(e.auditDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.List(audit.Filter{Labels: map[string]string{session.LabelSession: s.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string]string{}
	for _, row := range rows {
		cells[row.Labels[session.LabelCell]] = row.Status
	}
	want := map[string]string{"1": "ok", "2": "ok", "3": "ok", "4": "error", "5": "policy_violation", "6": "ok"}
	if fmt.Sprint(cells) != fmt.Sprint(want) {
		t.Errorf("audit rows by cell: %v; want %v", cells, want)
	}
	e.noLeftovers(t)
}

// TestSessionOutputSplit: a cell's output is cut exactly at its end,
// however much it wrote (more than the pipes hold); past the cap a
// cell's stream is truncated and marked, the session goes on and the
// next cell has its own cap.
func TestSessionOutputSplit(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, "default", 0, func(pl *plan.Plan) { pl.OutputLimit = 1 << 20 })
	for i := range 20 {
		n := 1 + (i*40009)%(300<<10)
		r := cell(t, s, fmt.Sprintf("import sys\nsys.stdout.write('%c' * %d)\nsys.stderr.write('e' * %d)", 'a'+i%26, n, i), 0, result.StatusOK)
		if len(r.Stdout) != n || strings.Count(r.Stdout, string(rune('a'+i%26))) != n || len(r.Stderr) != i || r.StdoutTruncated {
			t.Fatalf("cell %d: %d bytes of stdout (%d of its own), %d of stderr, truncated %v; want %d, %d",
				i, len(r.Stdout), strings.Count(r.Stdout, string(rune('a'+i%26))), len(r.Stderr), r.StdoutTruncated, n, i)
		}
	}
	r := cell(t, s, "print('x' * (3 << 20))", 0, result.StatusOK)
	if len(r.Stdout) != 1<<20 || !r.StdoutTruncated {
		t.Errorf("over the cap: %d bytes, truncated %v; want %d, true", len(r.Stdout), r.StdoutTruncated, 1<<20)
	}
	r = cell(t, s, "print('after')", 0, result.StatusOK)
	if r.Stdout != "after\n" || r.StdoutTruncated {
		t.Errorf("the cell after: %q truncated %v", r.Stdout, r.StdoutTruncated)
	}
}

// TestSessionTimeoutInterrupts: a cell that loops past its timeout is
// interrupted, ends with status timeout, and the session lives: its
// state is intact and the next cell runs. A caller's Interrupt ends a
// cell as killed, the session alive; a second cell while one runs is
// refused.
func TestSessionTimeoutInterrupts(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, "default", 0, nil)
	cell(t, s, "kept = 'yes'", 0, result.StatusOK)
	start := time.Now()
	r := cell(t, s, "while True:\n    pass", time.Second, result.StatusTimeout)
	if d := time.Since(start); d > time.Second+supervisor.StopGrace {
		t.Errorf("the interrupted cell took %v", d)
	}
	if r.Limit != result.LimitWallTime || !strings.Contains(r.Reason, "session lives") || !strings.Contains(r.Stderr, "KeyboardInterrupt") {
		t.Errorf("timeout cell: limit %q reason %q stderr %q", r.Limit, r.Reason, r.Stderr)
	}
	r = cell(t, s, "print(kept)", 0, result.StatusOK)
	if r.Stdout != "yes\n" {
		t.Errorf("after the timeout: %q", r.Stdout)
	}

	done := make(chan *result.Result)
	go func() {
		r, err := s.Run(context.Background(), []byte("import time\nprint('sleeping', flush=True)\ntime.sleep(30)"), 0)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(500 * time.Millisecond)
	if _, err := s.Run(context.Background(), []byte("print(1)"), 0); !errors.Is(err, session.ErrBusy) {
		t.Errorf("a second cell while one runs: %v; want ErrBusy", err)
	}
	for !s.Interrupt() {
		time.Sleep(10 * time.Millisecond)
	}
	r = <-done
	if r == nil || r.Status != result.StatusKilled || !strings.Contains(r.Reason, "caller") {
		t.Fatalf("interrupted cell: %+v", r)
	}
	cell(t, s, "print(kept)", 0, result.StatusOK)
}

// TestSessionKilledAfterGrace: a cell that ignores SIGINT is killed with
// its session after the grace, status timeout, and the reason says the
// interrupt did not stop it; the session is over and nothing is left.
func TestSessionKilledAfterGrace(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, osOnly(t, "default"), 0, nil)
	start := time.Now()
	r := cell(t, s, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", time.Second, result.StatusTimeout)
	d := time.Since(start)
	if d < time.Second+supervisor.StopGrace || d > time.Second+supervisor.StopGrace+3*time.Second {
		t.Errorf("killed after %v; want the timeout plus the grace", d)
	}
	if !strings.Contains(r.Reason, "did not stop") || !strings.Contains(r.Reason, "killed") {
		t.Errorf("reason %q", r.Reason)
	}
	if _, err := s.Run(context.Background(), []byte("print(1)"), 0); !errors.Is(err, session.ErrClosed) {
		t.Errorf("a cell after the kill: %v; want ErrClosed", err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the killed session was not torn down")
	}
	if final := s.Close(); final.Status != result.StatusTimeout {
		t.Errorf("session result %s %q; want the cell's timeout", final.Status, final.Reason)
	}
	e.noLeftovers(t)
}

// TestSessionMemoryBomb: a cell that allocates past the memory limit
// ends memory_limit, and with it the session.
func TestSessionMemoryBomb(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, "strict", 0, nil)
	cell(t, s, "x = 1", 0, result.StatusOK)
	r := cell(t, s, "blocks = []\nfor i in range(96):\n    blocks.append(b'\\x01' * (64 << 20))\nprint('NOLIMIT')", 0, result.StatusMemoryLimit)
	if r.Limit != result.LimitMemory || strings.Contains(r.Stdout, "NOLIMIT") || !strings.Contains(r.Reason, "session is over") {
		t.Errorf("limit %q reason %q stdout %q", r.Limit, r.Reason, r.Stdout)
	}
	if _, err := s.Run(context.Background(), []byte("print(x)"), 0); !errors.Is(err, session.ErrClosed) {
		t.Errorf("a cell after the OOM kill: %v; want ErrClosed", err)
	}
	if final := s.Close(); final.Status != result.StatusMemoryLimit {
		t.Errorf("session result %s; want memory_limit", final.Status)
	}
	e.noLeftovers(t)
}

// TestSessionFiles: files written from the host are the program's
// (readable, writable, owned by its uid), files the program writes come
// back, listing and removal work; paths out of /workspace and a link the
// program planted to a host file are refused, and the host file is
// untouched.
func TestSessionFiles(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, osOnly(t, "default"), 0, nil)
	f, err := s.Files()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("data/in.csv", []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cell(t, s, `import os
st = os.stat('/workspace/data/in.csv')
print(st.st_uid == os.getuid(), st.st_gid == os.getgid(), open('/workspace/data/in.csv').read().count('\n'))
with open('/workspace/data/in.csv', 'a') as fh:
    fh.write('3,4\n')
with open('/workspace/out.txt', 'w') as fh:
    fh.write('from the cell')
os.symlink('/etc/passwd', '/workspace/passwd')
os.symlink('/etc', '/workspace/etc')`, 0, result.StatusOK)
	if r.Stdout != "True True 2\n" {
		t.Errorf("the cell saw %q", r.Stdout)
	}
	if b, err := f.ReadFile("out.txt", 100); err != nil || string(b) != "from the cell" {
		t.Errorf("out.txt: %q, %v", b, err)
	}
	if b, err := f.ReadFile("data/in.csv", 100); err != nil || string(b) != "a,b\n1,2\n3,4\n" {
		t.Errorf("in.csv: %q, %v", b, err)
	}
	ls, err := f.List("")
	if err != nil || fmt.Sprint(ls) != fmt.Sprint([]supervisor.FileInfo{
		{Path: "data", Type: supervisor.TypeDir, Mode: 0o755},
		{Path: "etc", Type: supervisor.TypeSymlink, Mode: 0o777},
		{Path: "out.txt", Type: supervisor.TypeFile, Size: 13, Mode: 0o644},
		{Path: "passwd", Type: supervisor.TypeSymlink, Mode: 0o777},
	}) {
		t.Errorf("List: %+v, %v", ls, err)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	for _, p := range []string{"passwd", "etc/passwd", "../x", "/etc/passwd", "data/../../x"} {
		if _, err := f.ReadFile(p, 1<<20); !errors.Is(err, supervisor.ErrRefused) {
			t.Errorf("ReadFile(%q): %v; want ErrRefused", p, err)
		}
		if err := f.WriteFile(p, []byte("sandbox"), 0o644); !errors.Is(err, supervisor.ErrRefused) {
			t.Errorf("WriteFile(%q): %v; want ErrRefused", p, err)
		}
	}
	if after, _ := os.ReadFile("/etc/passwd"); string(after) != string(passwd) {
		t.Fatal("/etc/passwd changed")
	}
	if err := f.Remove("out.txt"); err != nil {
		t.Error(err)
	}
	cell(t, s, "import os\nassert not os.path.exists('/workspace/out.txt')", 0, result.StatusOK)
	s.Close()
	if _, err := f.ReadFile("data/in.csv", 100); !errors.Is(err, supervisor.ErrNoFiles) {
		t.Errorf("after Close: %v; want ErrNoFiles", err)
	}
	e.noLeftovers(t)
}

// TestSessionIdle: a session with no cell for its idle timeout is
// closed and torn down; a cell in progress holds it open.
func TestSessionIdle(t *testing.T) {
	e := newSessionEnv(t)
	s := e.open(t, "default", time.Second, nil)
	cell(t, s, "import time\ntime.sleep(1.5)", 0, result.StatusOK)
	cell(t, s, "print(1)", 0, result.StatusOK) // the sleep did not count as idle
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the idle session was not closed")
	}
	if final := s.Close(); !strings.Contains(final.Reason, "idle") {
		t.Errorf("session result %s %q; want the idle timeout", final.Status, final.Reason)
	}
	if _, err := s.Run(context.Background(), []byte("print(1)"), 0); !errors.Is(err, session.ErrClosed) {
		t.Errorf("a cell after the idle timeout: %v; want ErrClosed", err)
	}
	e.noLeftovers(t)
}

// TestSessionsConcurrent: 20 sessions at once, each with state across
// cells and a mix of outcomes (ok, an exception, a violation, a timeout
// that interrupts), then closed: nothing is left.
func TestSessionsConcurrent(t *testing.T) {
	e := newSessionEnv(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := e.open(t, "default", 0, nil)
			defer s.Close()
			steps := []struct {
				code   string
				status result.Status
			}{
				{fmt.Sprintf("n = %d", i), result.StatusOK},
				{"print(n * 2)", result.StatusOK},
				{[]string{"1/0", "import socket", "while True:\n    pass", "print(n)"}[i%4], []result.Status{
					result.StatusError, result.StatusPolicyViolation, result.StatusTimeout, result.StatusOK}[i%4]},
				{"print(n)", result.StatusOK},
			}
			for j, st := range steps {
				r, err := s.Run(context.Background(), []byte(st.code), 2*time.Second)
				if err != nil || r.Status != st.status {
					t.Errorf("session %d cell %d: %v %+v", i, j, err, r)
					return
				}
				if j == 3 && r.Stdout != fmt.Sprintf("%d\n", i) {
					t.Errorf("session %d: state %q", i, r.Stdout)
				}
			}
			if final := s.Close(); final.Status != result.StatusOK {
				t.Errorf("session %d: %s %q %+v", i, final.Status, final.Reason, final.Error)
			}
		}()
	}
	wg.Wait()
	e.noLeftovers(t)
}

// TestSessionDatasci: a pandas session as an agent runs one: state
// persists, a DataFrame comes back as HTML and text, a figure shown
// with plt.show() as a PNG that decodes, and the next cell starts with
// no figure open.
func TestSessionDatasci(t *testing.T) {
	if _, err := os.Stat(filepath.Join(rootsDir(), "datasci", ".nsbox")); err != nil {
		mustwork.Skip(t, "datasci root not built (make datasci): %v", err)
	}
	e := newSessionEnv(t)
	s := e.open(t, "datasci", 0, nil)
	cell(t, s, "import pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.DataFrame({'x': range(1000), 'y': [i * i for i in range(1000)]})", 0, result.StatusOK)
	r := cell(t, s, "df.describe()", 0, result.StatusOK)
	if len(r.Outputs) != 2 || r.Outputs[0].Type != result.OutputHTML || !strings.Contains(r.Outputs[0].Data, "<table") ||
		r.Outputs[1].Type != result.OutputText || !strings.Contains(r.Outputs[1].Data, "count") {
		t.Errorf("describe outputs: %+v", r.Outputs)
	}
	r = cell(t, s, "plt.plot(df.x, df.y)\nplt.show()", 0, result.StatusOK)
	if len(r.Outputs) != 1 || r.Outputs[0].Type != result.OutputPNG {
		t.Fatalf("figure outputs: %d, %+v", len(r.Outputs), r.Outputs)
	}
	b, err := base64.StdEncoding.DecodeString(r.Outputs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() < 100 {
		t.Errorf("the figure does not decode as a PNG: %v", err)
	}
	r = cell(t, s, "print(len(df), len(plt.get_fignums()))", 0, result.StatusOK)
	if r.Stdout != "1000 0\n" || len(r.Outputs) != 0 {
		t.Errorf("the next cell: %q, outputs %+v", r.Stdout, r.Outputs)
	}
}
