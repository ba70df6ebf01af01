package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestServeStream: POST /v1/runs with Accept: application/x-ndjson
// answers the program's output as events while it runs (the first
// arrives before the program ends), then the result as the last line.
func TestServeStream(t *testing.T) {
	needRoot(t)
	s := startServe(t, "")
	s.ready(t)
	code := "import sys, time\nprint('first', flush=True)\nsys.stderr.write('warn\\n'); sys.stderr.flush()\ntime.sleep(1)\nprint('héllo <b>')\nraise SystemExit(2)"
	body, _ := json.Marshal(map[string]any{"code": code, "policy": "default"})
	req, err := newRequest(s, "POST", "/v1/runs", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	var lines [][]byte
	var firstAt time.Duration
	for sc.Scan() {
		if len(lines) == 0 {
			firstAt = time.Since(start)
		}
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	total := time.Since(start)
	if len(lines) < 2 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	out := map[string]string{}
	for _, l := range lines[:len(lines)-1] {
		var ev struct{ Stream, Data string }
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil || (ev.Stream != "stdout" && ev.Stream != "stderr") {
			t.Fatalf("event %q: %v", l, err)
		}
		out[ev.Stream] += ev.Data
	}
	if out["stdout"] != "first\nhéllo <b>\n" || out["stderr"] != "warn\n" {
		t.Errorf("events carried %q", out)
	}
	if firstAt > total-500*time.Millisecond {
		t.Errorf("first event after %s of %s: not streamed", firstAt, total)
	}
	r := decode(t, lines[len(lines)-1])
	if r.Status != result.StatusError || r.ExitCode == nil || *r.ExitCode != 2 || !strings.Contains(r.Stdout, "first") {
		t.Errorf("last line: %s", lines[len(lines)-1])
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

func newRequest(s *served, method, path string, body []byte) (*http.Request, error) {
	return http.NewRequest(method, s.base+path, bytes.NewReader(body))
}
