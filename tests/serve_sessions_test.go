package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// jsonDo sends method path with body as JSON and decodes the answer into
// out (when not nil and the status is 2xx); it returns the status and
// the raw body.
func (s *served) jsonDo(t *testing.T, method, path string, body any, out any) (int, []byte) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	status, resp := s.do(t, method, path, b, "Content-Type", "application/json")
	if out != nil && status/100 == 2 {
		if err := json.Unmarshal(resp, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, resp)
		}
	}
	return status, resp
}

// cell runs code as the session's next cell and returns its result.
func (s *served) cell(t *testing.T, id, code string) *result.Result {
	t.Helper()
	status, b := s.jsonDo(t, "POST", "/v1/sessions/"+id+"/cells", map[string]any{"code": code}, nil)
	if status != 200 {
		t.Fatalf("cell %q: %d %s", code, status, b)
	}
	return decode(t, b)
}

// TestServeSessions: sessions through the real service: state across
// cells and a display output, one cell at a time (409), an interrupt,
// the workspace's files in and out and escapes refused, --max-sessions
// (429), DELETE, every cell an audit row labelled with its session, and
// the drain ends the sessions still open, leaving nothing.
func TestServeSessions(t *testing.T) {
	needRoot(t)
	s := startServe(t, "", "--max-sessions", "2")
	s.ready(t)
	var created struct {
		ID, Policy string
		Created    time.Time
	}
	req := map[string]any{"policy": "default", "timeout_per_cell": 10, "idle_timeout": 120, "labels": map[string]string{"job": "sessions"}}
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", req, &created); st != 201 || created.ID == "" || created.Policy != "default" {
		t.Fatalf("POST /v1/sessions: %d %s", st, b)
	}
	id := created.ID
	if r := s.cell(t, id, "x = 6 * 7\nprint('hi')"); r.Status != result.StatusOK || r.Stdout != "hi\n" {
		t.Errorf("first cell: %s %q", r.Status, r.Stdout)
	}
	if r := s.cell(t, id, "x"); r.Status != result.StatusOK || len(r.Outputs) != 1 || r.Outputs[0].Data != "42" {
		t.Errorf("second cell: %s %+v, want the display of x (state kept)", r.Status, r.Outputs)
	}

	// One cell at a time; an interrupt stops the running one.
	done := make(chan *result.Result, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"code": "import time\nwhile True: time.sleep(0.01)"})
		resp, err := s.client.Post(s.base+"/v1/sessions/"+id+"/cells", "application/json", strings.NewReader(string(body)))
		if err != nil {
			done <- nil
			return
		}
		defer resp.Body.Close()
		var r result.Result
		if json.NewDecoder(resp.Body).Decode(&r) != nil {
			done <- nil
			return
		}
		done <- &r
	}()
	deadline := time.Now().Add(10 * time.Second)
	var info struct{ Running bool }
	for time.Now().Before(deadline) {
		if s.jsonDo(t, "GET", "/v1/sessions/"+id, nil, &info); info.Running {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !info.Running {
		t.Fatal("the looping cell never ran")
	}
	time.Sleep(200 * time.Millisecond) // the cell's code, not its start, is interrupted
	if st, b := s.jsonDo(t, "POST", "/v1/sessions/"+id+"/cells", map[string]any{"code": "1"}, nil); st != 409 || !strings.Contains(string(b), "cell_running") {
		t.Errorf("a second cell while one runs: %d %s, want 409", st, b)
	}
	var intr struct{ Interrupted bool }
	if st, b := s.jsonDo(t, "POST", "/v1/sessions/"+id+"/interrupt", nil, &intr); st != 200 || !intr.Interrupted {
		t.Errorf("interrupt: %d %s", st, b)
	}
	select {
	case r := <-done:
		if r == nil || r.Status == result.StatusOK {
			t.Errorf("interrupted cell: %+v, want it stopped", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted cell did not return")
	}
	if r := s.cell(t, id, "print(x)"); r.Status != result.StatusOK || r.Stdout != "42\n" {
		t.Errorf("cell after the interrupt: %s %q", r.Status, r.Stdout)
	}

	// Files in and out.
	files := "/v1/sessions/" + id + "/files"
	if st, b := s.do(t, "PUT", files+"/data/in.txt?mode=600", []byte("hello")); st != 204 {
		t.Errorf("PUT a file: %d %s", st, b)
	}
	if r := s.cell(t, id, "import os\nprint(open('/workspace/data/in.txt').read())\nprint(oct(os.stat('/workspace/data/in.txt').st_mode & 0o777))\nopen('/workspace/out.txt', 'w').write('from the cell')"); r.Status != result.StatusOK || r.Stdout != "hello\n0o600\n" {
		t.Errorf("the cell reads the uploaded file: %s %q %q", r.Status, r.Stdout, r.Stderr)
	}
	var list struct {
		Files []struct {
			Path, Type string
			Size       int64
		}
	}
	if st, b := s.jsonDo(t, "GET", files, nil, &list); st != 200 || !strings.Contains(fmt.Sprint(list.Files), "{out.txt file 13}") || !strings.Contains(fmt.Sprint(list.Files), "{data dir") {
		t.Errorf("list: %d %s", st, b)
	}
	if st, b := s.get(t, files+"/out.txt"); st != 200 || string(b) != "from the cell" {
		t.Errorf("GET a file: %d %q", st, b)
	}
	if st, b := s.do(t, "DELETE", files+"/out.txt", nil); st != 204 {
		t.Errorf("DELETE a file: %d %s", st, b)
	}
	if st, _ := s.get(t, files+"/out.txt"); st != 404 {
		t.Errorf("GET a deleted file: %d, want 404", st)
	}
	s.cell(t, id, "import os\nos.symlink('/etc/passwd', '/workspace/link')")
	for _, p := range []string{"/link", "/data/../../x", "/%2Fetc%2Fpasswd"} {
		if st, b := s.get(t, files+p); st != 400 && st != 404 {
			t.Errorf("GET %s: %d %s, want it refused", p, st, b)
		} else if strings.Contains(string(b), "root:") {
			t.Errorf("GET %s read a host file", p)
		}
	}
	if st, b := s.get(t, files+"/link"); st != 400 || !strings.Contains(string(b), "path_refused") {
		t.Errorf("GET through a planted link: %d %s, want 400", st, b)
	}

	// --max-sessions.
	var second struct{ ID string }
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", map[string]any{"policy": "strict"}, &second); st != 201 {
		t.Fatalf("second session: %d %s", st, b)
	}
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", map[string]any{"policy": "strict"}, nil); st != 429 || !strings.Contains(string(b), "too_many_sessions") {
		t.Errorf("third session past --max-sessions 2: %d %s, want 429", st, b)
	}
	var all struct{ Sessions []struct{ ID string } }
	if s.jsonDo(t, "GET", "/v1/sessions", nil, &all); len(all.Sessions) != 2 {
		t.Errorf("GET /v1/sessions: %+v, want 2", all)
	}
	if st, b := s.jsonDo(t, "DELETE", "/v1/sessions/"+second.ID, nil, nil); st != 200 || decode(t, b).Status != result.StatusOK {
		t.Errorf("DELETE a session: %d %s", st, b)
	}
	for _, p := range []string{"", "/cells", "/files"} {
		method := map[string]string{"": "GET", "/cells": "POST", "/files": "GET"}[p]
		if st, _ := s.jsonDo(t, method, "/v1/sessions/"+second.ID+p, map[string]any{"code": "1"}, nil); st != 404 {
			t.Errorf("%s a deleted session%s: %d, want 404", method, p, st)
		}
	}

	rows := auditRows(t, s.db)
	cells := 0
	for _, row := range rows {
		if strings.Contains(fmt.Sprint(row["labels"]), "session:"+id) {
			cells++
		}
	}
	if cells != 6 {
		t.Errorf("%d audit rows of the session's cells, want 6: %v", cells, rows)
	}
	// The first session is still open: the drain ends it.
	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("drain: exit %d\n%s", code, s.logText())
	}
	s.nothingLeft(t)
}
