package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/internal/mustwork"
)

// mcpPython is the interpreter of the venv with the official MCP Python
// client (make mcp-venv; make test sets NSBOX_MCP_PYTHON), or a skip.
func mcpPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("NSBOX_MCP_PYTHON")
	if py == "" {
		mustwork.Skip(t, "NSBOX_MCP_PYTHON is not set (make mcp-venv builds the MCP client's venv; make test sets it)")
	}
	return py
}

// mcpNothingLeft waits for this test's sandboxes to be gone: no process of
// the suite's uids, no run cgroup, no run directory of state.
func mcpNothingLeft(t *testing.T, state string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ours, _ := stressCgroups(t, state)
		if len(sandboxProcesses(t)) == 0 && len(ours) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p := sandboxProcesses(t); len(p) > 0 {
		t.Errorf("sandbox processes left: %v", p)
	}
	if ours, _ := stressCgroups(t, state); len(ours) > 0 {
		t.Errorf("run cgroups left: %v", ours)
	}
	(&outcome{state: state}).noLeftovers(t)
}

// TestMCPStdio: nsbox mcp driven by the official MCP Python client over
// stdio (tests/mcp/driver.py): the tools listed with their descriptions,
// run_python's result, a refused policy as a tool error, a datasci
// session that reads an uploaded CSV with pandas and returns a chart as a
// PNG image, the files, an exception as data, escapes refused, and two
// sessions left open: closing stdin ends them, and nothing is left.
func TestMCPStdio(t *testing.T) {
	needRoot(t)
	py := mcpPython(t)
	state := t.TempDir()
	errlog := filepath.Join(t.TempDir(), "mcp.log")
	cmd := exec.Command(py, "mcp/driver.py", "check", nsboxBin, errlog, "--",
		"--audit-db", filepath.Join(state, "audit.db"), "--policies", "default,datasci", "--pool", "1")
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	log, _ := os.ReadFile(errlog)
	var got struct {
		OK       bool
		Error    string
		LeftOpen []string `json:"left_open"`
	}
	if jerr := json.Unmarshal(out, &got); jerr != nil || !got.OK {
		t.Fatalf("driver: %v %+v\nstdout: %s\nstderr: %s\nnsbox mcp's log:\n%s", err, got, out, stderr.Bytes(), log)
	}
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, stderr.Bytes())
	}
	// The client closed stdin: nsbox mcp closed what was open and exited
	// on its own.
	if !strings.Contains(string(log), "the client closed the connection; every session is closed") {
		t.Errorf("nsbox mcp did not end on its own when stdin closed:\n%s", log)
	}
	for _, id := range got.LeftOpen {
		if !regexp.MustCompile(`session ` + id + `: closed`).Match(log) {
			t.Errorf("session %s left open was not closed:\n%s", id, log)
		}
	}
	mcpNothingLeft(t, state)
	// Every run and cell is an audit row, as through the API.
	o := nsbox(t, run{args: []string{"audit", "list", "--audit-db", filepath.Join(state, "audit.db"), "--json", "--label", "door=mcp"}})
	var rows []map[string]any
	if err := json.Unmarshal(o.stdout, &rows); err != nil || len(rows) < 6 {
		t.Errorf("audit rows labelled door=mcp: %d (%v), want every run and cell (2 runs, 4 cells)\n%s%s", len(rows), err, o.stdout, o.stderr)
	}
}

// TestMCPDocExample: the Python example of docs/mcp.md, run verbatim with
// nsbox on the PATH (a wrapper that keeps the test's state dir, roots
// and uids).
func TestMCPDocExample(t *testing.T) {
	needRoot(t)
	py := mcpPython(t)
	doc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- example -->\n```python\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/mcp.md: no ```python block after <!-- example -->")
	}
	if n := bytes.Count(m[1], []byte("\n")); n > 12 {
		t.Errorf("docs/mcp.md's example is %d lines; keep it short", n)
	}
	dir := t.TempDir()
	state := t.TempDir()
	script := filepath.Join(dir, "example.py")
	if err := os.WriteFile(script, m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	// The MCP client passes the server a safe subset of its environment:
	// the wrapper sets the test's own.
	wrapper := fmt.Sprintf("#!/bin/sh\nexec env NSBOX_STATE_DIR=%s NSBOX_AUDIT_DB=%s NSBOX_ID_RANGE=%s NSBOX_ROOTS_DIR=%s %s \"$@\" --pool 0\n",
		state, filepath.Join(state, "audit.db"), os.Getenv("NSBOX_ID_RANGE"), os.Getenv("NSBOX_ROOTS_DIR"), nsboxBin)
	if err := os.WriteFile(filepath.Join(dir, "nsbox"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the example: %v\n%s%s", err, out, stderr.Bytes())
	}
	if want := "42\nok 6\n"; string(out) != want {
		t.Errorf("the example printed %q, want %q", out, want)
	}
	mcpNothingLeft(t, state)
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestMCPHTTP: /mcp on nsbox serve over TCP, with the Go SDK's client:
// no session without the token; with it, the tools run through the same
// service (a session opened over MCP is in GET /v1/sessions and counts
// against --max-sessions), a refused policy is a tool error, and ending
// the MCP session closes the sandbox sessions it left open.
func TestMCPHTTP(t *testing.T) {
	needRoot(t)
	addr := fmt.Sprintf("tcp:127.0.0.1:%d", freePort(t))
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := "7c1d2c5e8a9b7c6d5e4f3a2b1c0d9e8f"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "", "--listen", addr, "--token-file", tokenFile, "--pool", "0", "--max-sessions", "1")
	auth := []string{"Authorization", "Bearer " + token}
	s.ready(t, auth...)
	endpoint := s.base + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "nsbox-test", Version: "1"}, nil)

	if cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Fatal("an MCP session without the token")
	} else if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Errorf("connect without the token: %v, want 401", err)
	}
	wrong := &http.Client{Transport: bearer{"wrong-token-wrong-token", http.DefaultTransport}}
	if cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: wrong, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Fatal("an MCP session with a wrong token")
	}

	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.logText())
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 7 {
		t.Fatalf("tools: %v %v", err, tools)
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	structured := func(r *mcp.CallToolResult) map[string]any {
		t.Helper()
		b, _ := json.Marshal(r.StructuredContent)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
		return m
	}
	if r := call("run_python", map[string]any{"code": "print(6*7)"}); r.IsError || structured(r)["stdout"] != "42\n" || structured(r)["status"] != "ok" {
		t.Errorf("run_python: %+v", r)
	}
	if r := call("run_python", map[string]any{"code": "print(input()[::-1])", "stdin": "é tupni\n"}); r.IsError || structured(r)["stdout"] != "input é\n" {
		t.Errorf("run_python with stdin: %+v", r)
	}
	if r := call("run_python", map[string]any{"code": "1", "policy": "permissive"}); !r.IsError {
		t.Errorf("a policy not served: %+v, want a tool error", r)
	}
	r := call("create_session", map[string]any{"policy": "default"})
	id, _ := structured(r)["session_id"].(string)
	if r.IsError || id == "" {
		t.Fatalf("create_session: %+v", r)
	}
	if r := call("run_cell", map[string]any{"session_id": id, "code": "x = 6 * 7\nx"}); r.IsError || structured(r)["status"] != "ok" {
		t.Errorf("run_cell: %+v", r)
	}
	// The same table as the API's: listed there, and counted.
	var list struct{ Sessions []struct{ ID string } }
	sessions := func() (int, []byte) {
		st, b := s.get(t, "/v1/sessions", auth...)
		list.Sessions = nil
		if st == 200 {
			if err := json.Unmarshal(b, &list); err != nil {
				t.Fatalf("GET /v1/sessions: %v\n%s", err, b)
			}
		}
		return st, b
	}
	if st, b := sessions(); st != 200 || len(list.Sessions) != 1 || list.Sessions[0].ID != id {
		t.Errorf("GET /v1/sessions: %d %s, want the MCP session %s", st, b, id)
	}
	if r := call("create_session", map[string]any{}); !r.IsError {
		t.Errorf("a second session past --max-sessions 1: %+v", r)
	}
	// Ending the MCP session (the client's DELETE) closes the sandbox's.
	if err := cs.Close(); err != nil {
		t.Errorf("close the MCP session: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if sessions(); len(list.Sessions) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(list.Sessions) != 0 {
		t.Errorf("sessions after the MCP session ended: %+v", list.Sessions)
	}
	// The drain with an MCP session open (its client's stream hanging):
	// the service still exits 0, its sandbox session closed.
	cs, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect again: %v", err)
	}
	defer cs.Close()
	if r := call("create_session", map[string]any{}); r.IsError {
		t.Fatalf("create_session: %+v", r)
	}
	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("nsbox serve exited %d\n%s", code, s.logText())
	}
	s.nothingLeft(t)
}
