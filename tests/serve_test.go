package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// served is one nsbox serve started by a test, and a client of it.
type served struct {
	cmd    *exec.Cmd
	client *http.Client
	base   string // the URL prefix: http://nsbox over the socket, or the TCP address
	sock   string // the Unix socket; "" on TCP
	state  string
	db     string
	log    string // the service's stderr
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// startServe starts nsbox serve with args (a Unix socket in a temp dir
// unless args give --listen) and waits until it answers.
func startServe(t *testing.T, state string, args ...string) *served {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	s := &served{state: state, db: filepath.Join(state, "audit.db"), log: filepath.Join(t.TempDir(), "serve.log"), done: make(chan struct{})}
	listen := ""
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			listen = args[i+1]
		}
	}
	if listen == "" {
		s.sock = filepath.Join(state, "sock", "nsbox.sock")
		args = append(args, "--listen", "unix:"+s.sock)
	}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(nsboxBin, append([]string{"serve", "--audit-db", s.db}, args...)...)
	s.cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start nsbox serve: %v", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
			return
		default:
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(40 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	if s.sock != "" {
		s.base = "http://nsbox"
		s.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", s.sock)
		}}}
	} else {
		s.base = "http://" + strings.TrimPrefix(listen, "tcp:")
		s.client = &http.Client{}
	}
	return s
}

// ready waits until the service answers /v1/health (with hdr), or fails.
func (s *served) ready(t *testing.T, hdr ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			t.Fatalf("nsbox serve exited: %v\n%s", s.err, s.logText())
		default:
		}
		if st, _ := s.get(t, "/v1/health", hdr...); st == 200 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nsbox serve did not answer within 20s\n%s", s.logText())
}

func (s *served) logText() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// get sends GET path; a transport error is status 0.
func (s *served) get(t *testing.T, path string, hdr ...string) (int, []byte) {
	t.Helper()
	return s.do(t, "GET", path, nil, hdr...)
}

func (s *served) do(t *testing.T, method, path string, body []byte, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// run posts a run request and decodes the result (status 200) strictly,
// as the tests decode nsbox run --json.
func (s *served) run(t *testing.T, req map[string]any, hdr ...string) (int, *result.Result, []byte) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	status, b := s.do(t, "POST", "/v1/runs", body, append([]string{"Content-Type", "application/json"}, hdr...)...)
	if status != 200 {
		return status, nil, b
	}
	var r result.Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("POST /v1/runs: not a result: %v\n%s", err, b)
	}
	return status, &r, b
}

// post sends a run request from any goroutine (it never fails the test)
// and returns the status and the body, or the transport error's text.
func (s *served) post(code string) (int, []byte) {
	body, _ := json.Marshal(map[string]any{"code": code})
	resp, err := s.client.Post(s.base+"/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// decode reads a result strictly.
func decode(t *testing.T, b []byte) *result.Result {
	t.Helper()
	var r result.Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("not a result: %v\n%s", err, b)
	}
	return &r
}

// stopAndWait SIGTERMs the service and returns its exit code.
func (s *served) stopAndWait(t *testing.T) int {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("nsbox serve did not exit within 40s of SIGTERM\n%s", s.logText())
	}
	return s.cmd.ProcessState.ExitCode()
}

// nothingLeft checks that the service's runs left no run directory, no
// sandbox process and (once it exited) no socket.
func (s *served) nothingLeft(t *testing.T) {
	t.Helper()
	(&outcome{state: s.state}).noLeftovers(t)
	deadline := time.Now().Add(2 * time.Second)
	for len(sandboxProcesses(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := sandboxProcesses(t); len(p) > 0 {
		t.Errorf("sandbox processes left: %v", p)
	}
	if s.sock != "" {
		select {
		case <-s.done:
			if _, err := os.Lstat(s.sock); !os.IsNotExist(err) {
				t.Errorf("socket %s left after exit: %v", s.sock, err)
			}
		default:
		}
	}
}

// TestServeRun: a run through the socket is the run nsbox run --json
// gives (status, output, limits, audit row with its labels); a policy
// the service does not serve is refused with 403; the socket is not open
// to others.
func TestServeRun(t *testing.T) {
	needRoot(t)
	s := startServe(t, "")
	s.ready(t)
	fi, err := os.Stat(s.sock)
	if err != nil || fi.Mode().Perm()&0o007 != 0 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket %s: %v, %v; want a socket closed to others", s.sock, fi.Mode(), err)
	}
	status, r, body := s.run(t, map[string]any{"code": "print(6*7)\nraise SystemExit(3)", "policy": "strict", "timeout": 5, "labels": map[string]string{"job": "serve-test"}})
	if status != 200 {
		t.Fatalf("POST /v1/runs: %d %s", status, body)
	}
	if r.Status != result.StatusError || r.Stdout != "42\n" || r.ExitCode == nil || *r.ExitCode != 3 || r.Policy != "strict" || r.Limits.TimeoutMS != 5000 || r.Sandbox == nil {
		t.Errorf("result %s", body)
	}
	if strings.Contains(string(body), `"files"`) {
		t.Errorf("files listed without collect_files: %s", body)
	}
	rows := auditRows(t, s.db)
	if len(rows) != 1 || rows[0]["id"] != r.ID || rows[0]["status"] != "error" || !strings.Contains(fmt.Sprint(rows[0]["labels"]), "serve-test") {
		t.Errorf("audit rows %v, want the run's with its label", rows)
	}
	// Policies: permissive is not served by default; a refused request is
	// not a run and leaves no row.
	status, _, body = s.run(t, map[string]any{"code": "print(1)", "policy": "permissive"})
	if status != 403 || !strings.Contains(string(body), "policy_refused") {
		t.Errorf("permissive: %d %s, want 403", status, body)
	}
	// The Python layer holds as for nsbox run.
	_, r, body = s.run(t, map[string]any{"code": "import socket"})
	if r == nil || r.Status != result.StatusPolicyViolation {
		t.Errorf("import socket under default: %s", body)
	}
	if n := len(auditRows(t, s.db)); n != 2 {
		t.Errorf("%d audit rows, want 2 (the 403 is not a run)", n)
	}
	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, s.logText())
	}
	s.nothingLeft(t)
}

// TestServeFiles: files go in owned by the program (it can change them),
// what it writes comes back listed with sizes, and paths outside
// /workspace are refused without touching the host.
func TestServeFiles(t *testing.T) {
	needRoot(t)
	s := startServe(t, "")
	s.ready(t)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	code := `
import os
rows = open("data/in.csv").read().splitlines()
with open("data/in.csv", "a") as f:
    f.write("appended\n")
os.makedirs("out", exist_ok=True)
with open("out/sum.txt", "w") as f:
    f.write(str(len(rows)))
st = os.stat("run.sh")
print(oct(st.st_mode & 0o777), st.st_uid == os.getuid())
`
	_, r, body := s.run(t, map[string]any{"code": code, "collect_files": true, "files": []map[string]any{
		{"path": "data/in.csv", "content_base64": b64("a,b\n1,2\n3,4\n")},
		{"path": "run.sh", "content_base64": b64("#!/bin/sh\n"), "mode": 0o700},
	}})
	if r == nil || r.Status != result.StatusOK {
		t.Fatalf("run: %s", body)
	}
	if r.Stdout != "0o700 True\n" {
		t.Errorf("stdout %q, want the uploaded file's mode and owner", r.Stdout)
	}
	want := map[string]int64{"data/in.csv": int64(len("a,b\n1,2\n3,4\nappended\n")), "out/sum.txt": 1, "run.sh": int64(len("#!/bin/sh\n"))}
	got := map[string]int64{}
	for _, f := range r.Files {
		got[f.Path] = f.Size
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	// An empty workspace lists as [] when asked.
	_, r, body = s.run(t, map[string]any{"code": "pass", "collect_files": true})
	if r == nil || r.Files == nil || len(r.Files) != 0 || !strings.Contains(string(body), `"files":[]`) {
		t.Errorf("empty workspace: %s", body)
	}
	// Escapes: refused as the run's input, before the program; the host
	// canary is untouched.
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(canary, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../escape", canary, "a/../../escape", "/workspace/x"} {
		_, r, body = s.run(t, map[string]any{"code": "print('ran')", "files": []map[string]any{{"path": p, "content_base64": b64("x")}}})
		if r == nil || r.Status != result.StatusSandboxError || r.Error == nil || r.Error.Step != "files" || strings.Contains(r.Stdout, "ran") {
			t.Errorf("file path %q: %s, want sandbox_error at step files", p, body)
		}
	}
	if b, err := os.ReadFile(canary); err != nil || string(b) != "host" {
		t.Errorf("canary: %q, %v", b, err)
	}
	// More files than the workspace holds is refused before a sandbox
	// is built.
	var many []map[string]any
	for i := range 5000 {
		many = append(many, map[string]any{"path": fmt.Sprintf("f%d", i), "content_base64": ""})
	}
	_, r, body = s.run(t, map[string]any{"code": "pass", "policy": "strict", "files": many})
	if r == nil || r.Status != result.StatusSandboxError || r.Error.Step != "input" || !strings.Contains(r.Error.Message, "workspace_inodes") {
		t.Errorf("more files than the workspace holds: %.300s", body)
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

// TestServeLimits: past --max-concurrent-runs a run is refused at once
// with 429 while the others go on; past --max-body, 413.
func TestServeLimits(t *testing.T) {
	needRoot(t)
	s := startServe(t, "", "--max-concurrent-runs", "1", "--max-body", "4096")
	s.ready(t)
	first := make(chan []byte, 1)
	go func() {
		_, b := s.post("import time\ntime.sleep(2)\nprint('slept')")
		first <- b
	}()
	// Wait until the first run holds the slot.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, b := s.get(t, "/v1/health")
		if strings.Contains(string(b), `"runs_active":1`) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	status, _, body := s.run(t, map[string]any{"code": "print(1)"})
	if status != 429 || !strings.Contains(string(body), "too_many_runs") {
		t.Errorf("second run while one is in flight: %d %s, want 429", status, body)
	}
	if r := decode(t, <-first); r.Status != result.StatusOK || r.Stdout != "slept\n" {
		t.Errorf("the first run: %+v", r)
	}
	status, _, body = s.run(t, map[string]any{"code": "print('" + strings.Repeat("x", 5000) + "')"})
	if status != 413 || !strings.Contains(string(body), "body_too_large") {
		t.Errorf("body over --max-body: %d %s, want 413", status, body)
	}
	if _, r, body := s.run(t, map[string]any{"code": "print(1)"}); r == nil || r.Status != result.StatusOK {
		t.Errorf("a run after the refusals: %s", body)
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestServeTCPToken: TCP needs a token file, and every request its token;
// a non-loopback address needs --listen-public.
func TestServeTCPToken(t *testing.T) {
	needRoot(t)
	addr := fmt.Sprintf("tcp:127.0.0.1:%d", freePort(t))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--listen", addr}, "needs --token-file"},
		{[]string{"--listen", "tcp:0.0.0.0:1", "--token-file", "/dev/null"}, "--listen-public"},
		{[]string{"--listen", "tcp::1", "--token-file", "/dev/null"}, "--listen-public"},
	} {
		o := nsbox(t, run{args: append([]string{"serve"}, tc.args...)})
		if o.exit != result.ExitSandboxError || !strings.Contains(string(o.stderr), tc.msg) {
			t.Errorf("serve %q: exit %d, stderr %s; want 125 and %q", tc.args, o.exit, o.stderr, tc.msg)
		}
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := "3f1d2c5e8a9b7c6d5e4f3a2b1c0d9e8f"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "", "--listen", addr, "--token-file", tokenFile)
	auth := []string{"Authorization", "Bearer " + token}
	s.ready(t, auth...)
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer nottheone"}} {
		if status, _, body := s.run(t, map[string]any{"code": "print(1)"}, hdr...); status != 401 {
			t.Errorf("run with %q: %d %s, want 401", hdr, status, body)
		}
	}
	if _, r, body := s.run(t, map[string]any{"code": "print(1)"}, auth...); r == nil || r.Status != result.StatusOK {
		t.Errorf("run with the token: %s", body)
	}
	if n := len(auditRows(t, s.db)); n != 1 {
		t.Errorf("%d audit rows, want 1 (refused requests are not runs)", n)
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

// TestServeDrain: SIGTERM with a run in flight: the service stops
// accepting, the run finishes with its own status and its client gets the
// result, then the service exits 0 and leaves nothing.
func TestServeDrain(t *testing.T) {
	needRoot(t)
	s := startServe(t, "")
	s.ready(t)
	var wg sync.WaitGroup
	var body []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, body = s.post("import time\ntime.sleep(2)\nprint('finished')")
	}()
	// In flight once the service counts it: a sandbox process alone
	// may be a pool's, started before the request arrived.
	inFlight := func() bool {
		_, m := s.get(t, "/v1/metrics")
		return strings.Contains(string(m), "\nnsbox_runs_active 1\n")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !inFlight() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !inFlight() {
		t.Fatal("the run never started")
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	// New connections are refused once draining began.
	refused := false
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, _ := s.get(t, "/v1/health"); status == 0 {
			refused = true
			break
		}
	}
	if !refused {
		t.Error("the draining service still answers new requests")
	}
	wg.Wait()
	if r := decode(t, body); r.Status != result.StatusOK || r.Stdout != "finished\n" {
		t.Errorf("the run in flight: %s", body)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not exit after its last run")
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d, want 0\n%s", code, s.logText())
	}
	rows := auditRows(t, s.db)
	if len(rows) != 1 || rows[0]["status"] != "ok" {
		t.Errorf("audit rows %v, want the finished run", rows)
	}
	s.nothingLeft(t)
}

// TestServeKilled: a SIGKILLed service leaves no sandbox running
// (PDEATHSIG), and the next start on the same socket removes the stale
// socket, serves, and its first run sweeps the dead run's directory and
// finishes its audit row.
func TestServeKilled(t *testing.T) {
	needRoot(t)
	state := t.TempDir()
	// No pool: a sandbox process then means the run started
	// (TestPoolKilled kills a service with its pools).
	s := startServe(t, state, "--pool", "0")
	s.ready(t)
	go s.post("import time\ntime.sleep(25)")
	deadline := time.Now().Add(10 * time.Second)
	for len(sandboxProcesses(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(sandboxProcesses(t)) == 0 {
		t.Fatal("the run never started")
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	deadline = time.Now().Add(2 * time.Second)
	for len(sandboxProcesses(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := sandboxProcesses(t); len(p) > 0 {
		t.Fatalf("sandbox processes outlived the killed service: %v", p)
	}
	if _, err := os.Lstat(s.sock); err != nil {
		t.Fatalf("the killed service's socket should be left: %v", err)
	}
	s2 := startServe(t, state)
	s2.ready(t)
	if _, r, body := s2.run(t, map[string]any{"code": "print(1)"}); r == nil || r.Status != result.StatusOK {
		t.Errorf("a run after the restart: %s", body)
	}
	rows := auditRows(t, s2.db)
	statuses := map[any]int{}
	for _, row := range rows {
		statuses[row["status"]]++
	}
	if len(rows) != 2 || statuses["ok"] != 1 || statuses["killed"] != 1 {
		t.Errorf("audit rows %v, want the killed service's run finished as killed and the new one ok", rows)
	}
	s2.stopAndWait(t)
	s2.nothingLeft(t)
}

// TestServeClientGone: a client that closes its connection while its run
// is in flight stops the run (killed, the reason says why), and the row
// is finished; the service goes on.
func TestServeClientGone(t *testing.T) {
	needRoot(t)
	s := startServe(t, "", "--pool", "0") // a sandbox process means the run started
	s.ready(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/runs", strings.NewReader(`{"code":"import time\ntime.sleep(20)"}`))
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(sandboxProcesses(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(sandboxProcesses(t)) == 0 {
		t.Fatal("the run never started")
	}
	start := time.Now()
	cancel()
	<-done
	var rows []map[string]any
	for time.Now().Before(start.Add(5 * time.Second)) {
		if rows = auditRows(t, s.db); len(rows) == 1 && rows[0]["end"] != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(rows) != 1 || rows[0]["status"] != "killed" || !strings.Contains(fmt.Sprint(rows[0]["reason"]), "client went away") {
		t.Errorf("audit rows %v, want the run killed because its client went away", rows)
	}
	if _, r, body := s.run(t, map[string]any{"code": "print(1)"}); r == nil || r.Status != result.StatusOK {
		t.Errorf("a run after: %s", body)
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

// TestServeBinary: nsbox serve replaces itself with the nsbox-serve beside
// nsbox, only when root alone can have put it there; otherwise it stops
// with an error naming the file, and serves nothing.
func TestServeBinary(t *testing.T) {
	needRoot(t)
	beside := filepath.Join(filepath.Dir(nsboxBin), "nsbox-serve")
	if _, err := os.Stat(beside); err != nil {
		t.Fatalf("nsbox-serve beside %s: %v (make build puts it there)", nsboxBin, err)
	}
	for _, tc := range []struct {
		name  string
		mode  os.FileMode // of the copied nsbox-serve; 0: none
		want  string      // in stderr
		execd bool        // nsbox-serve read the flags
	}{
		{"missing", 0, "nsbox-serve: no such file or directory", false},
		{"group-writable", 0o775, "writable by group or others", false},
		{"trusted", 0o755, "needs --token-file", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyExe(t, nsboxBin, dir, "nsbox", 0o755)
			if tc.mode != 0 {
				copyExe(t, beside, dir, "nsbox-serve", tc.mode)
			}
			o := nsbox(t, run{binary: filepath.Join(dir, "nsbox"), args: []string{"serve", "--listen", "tcp:127.0.0.1:1"}})
			if o.exit != result.ExitSandboxError || !strings.Contains(string(o.stderr), tc.want) {
				t.Errorf("exit %d, stderr %q; want 125 and %q", o.exit, o.stderr, tc.want)
			}
			if named := strings.Contains(string(o.stderr), filepath.Join(dir, "nsbox-serve")); !tc.execd && !named {
				t.Errorf("stderr %q does not name %s", o.stderr, filepath.Join(dir, "nsbox-serve"))
			}
		})
	}
}
