package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/result"
)

// Program input: --stdin FILE (or -) and the service's stdin_base64 give
// the program bytes on its standard input, then end of input, after the
// program's own frame on the same pipe (sandbox/pyrunner's protocol).

// hashProgram prints the length and the sha256 of what it reads on stdin.
const hashProgram = "import hashlib, sys\ndata = sys.stdin.buffer.read()\nprint(len(data), hashlib.sha256(data).hexdigest())\n"

// binaryPayload is n bytes through every byte value, NUL, CR and 0xff
// included, in an order that is not a plain repeat.
func binaryPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i/256)
	}
	return b
}

// hashLine is what hashProgram prints for data.
func hashLine(data []byte) string {
	return fmt.Sprintf("%d %x\n", len(data), sha256.Sum256(data))
}

// writeTemp writes data to a file of the test's and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunStdin: nsbox run --stdin. The program reads every byte of a
// binary MiB; input() reads lines from nsbox's own standard input (-)
// and then finds EOF; a program that never reads an input larger than a pipe holds ends at
// once, ok; input over job.MaxStdin is refused before a sandbox starts,
// naming its size and the limit; --stdin - cannot share nsbox's standard
// input with a program read from it; without --stdin the program's stdin
// is at EOF, as before. The audit row keeps the input's digest and
// length, and a run without input has none.
func TestRunStdin(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	prog := writeTemp(t, "hash.py", []byte(hashProgram))
	data := binaryPayload(1 << 20)
	o := nsbox(t, run{auditDB: db, args: []string{"run", "--json", "--stdin", writeTemp(t, "in.bin", data), prog}})
	o.wantStatus(t, result.StatusOK)
	if want := hashLine(data); o.res.Stdout != want {
		t.Errorf("1 MiB of binary input: stdout %q, want %q", o.res.Stdout, want)
	}
	o.noLeftovers(t)

	lines := "a, b = input(), input()\nprint(repr(a), repr(b))\ntry:\n    input()\nexcept EOFError:\n    print('EOF')\n"
	o = nsbox(t, run{args: []string{"run", "--json", "--stdin", "-", "-c", lines}, stdin: "first line\nsecond, é\n"})
	o.wantStatus(t, result.StatusOK)
	if want := "'first line' 'second, é'\nEOF\n"; o.res.Stdout != want {
		t.Errorf("input() from --stdin -: stdout %q, want %q", o.res.Stdout, want)
	}

	big := writeTemp(t, "big.bin", binaryPayload(4<<20))
	o = nsbox(t, run{args: []string{"run", "--json", "--timeout", "20s", "--stdin", big, "-c", "print('did not read')"}})
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "did not read\n" || o.elapsed > scaled(10*time.Second) {
		t.Errorf("a program that ignores 4 MiB of input: stdout %q after %v (run %d ms)", o.res.Stdout, o.elapsed, o.res.DurationMS)
	}

	over := filepath.Join(t.TempDir(), "over.bin")
	if err := os.WriteFile(over, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(over, job.MaxStdin+1); err != nil { // sparse: refused on its size, never read
		t.Fatal(err)
	}
	o = nsbox(t, run{args: []string{"run", "--json", "--stdin", over, "-c", "print('ran')"}})
	o.wantStatus(t, result.StatusSandboxError)
	if e := o.res.Error; e == nil || e.Step != "input" || !strings.Contains(e.Message, fmt.Sprintf("%d bytes", job.MaxStdin+1)) ||
		!strings.Contains(e.Message, "64MiB") || o.res.Sandbox != nil || o.res.Stdout != "" {
		t.Errorf("input over the limit: error %+v, sandbox %+v, stdout %q", o.res.Error, o.res.Sandbox, o.res.Stdout)
	}

	o = nsbox(t, run{args: []string{"run", "--stdin", "-", "-"}, stdin: "print('ran')\n"})
	if o.exit != result.ExitSandboxError || !bytes.Contains(o.stderr, []byte("--stdin -: the program is read from standard input")) || len(o.stdout) != 0 {
		t.Errorf("--stdin - with the program on stdin: exit %d, stdout %q, stderr %q", o.exit, o.stdout, o.stderr)
	}

	o = nsbox(t, run{auditDB: db, args: []string{"run", "--json", "-c", "import sys\nprint(repr(sys.stdin.read()))"}, stdin: "not the program's"})
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "''\n" {
		t.Errorf("no --stdin: the program read %q", o.res.Stdout)
	}

	sum := sha256.Sum256(data)
	rows := auditRows(t, db)
	if len(rows) != 2 {
		t.Fatalf("%d audit rows, want 2", len(rows))
	}
	if rows[0]["stdin_sha256"] != hex.EncodeToString(sum[:]) || rows[0]["stdin_bytes"] != float64(len(data)) {
		t.Errorf("the row of the run given 1 MiB: stdin_sha256 %v, stdin_bytes %v; want %x, %d",
			rows[0]["stdin_sha256"], rows[0]["stdin_bytes"], sum, len(data))
	}
	if rows[1]["stdin_sha256"] != "" || rows[1]["stdin_bytes"] != float64(0) {
		t.Errorf("the row of a run given no input: stdin_sha256 %v, stdin_bytes %v", rows[1]["stdin_sha256"], rows[1]["stdin_bytes"])
	}
	if o := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}}); o.exit != 0 {
		t.Errorf("audit verify: exit %d: %s%s", o.exit, o.stdout, o.stderr)
	}
}

// TestServeStdin: the service's stdin_base64, in a cold run and in a run
// that takes a warm sandbox from the pool (whose runner waited for its
// program's frame); bad base64 is the run's input error; a cell refuses
// the field by name (400); nsbox run --server --stdin passes it on.
func TestServeStdin(t *testing.T) {
	needRoot(t)
	s := startServe(t, "", "--policies", "default", "--pool", "1")
	s.ready(t)
	data := binaryPayload(1 << 20)
	b64 := base64.StdEncoding.EncodeToString(data)

	r := pooledRun(t, s, map[string]any{"code": hashProgram, "policy": "default", "stdin_base64": b64})
	if r.Status != result.StatusOK || r.Stdout != hashLine(data) {
		t.Errorf("pooled run with input: %s %q %q %+v", r.Status, r.Stdout, r.Stderr, r.Error)
	}
	// A narrower timeout: a sandbox built for the run.
	st, r, body := s.run(t, map[string]any{"code": hashProgram, "policy": "default", "timeout": 20, "stdin_base64": b64})
	if st != 200 || r.Status != result.StatusOK || r.Stdout != hashLine(data) {
		t.Errorf("cold run with input: %d %s", st, body)
	}
	st, r, body = s.run(t, map[string]any{"code": "print(1)", "timeout": 20, "stdin_base64": "%%%"})
	if st != 200 || r.Status != result.StatusSandboxError || r.Error == nil || !strings.Contains(r.Error.Message, "stdin_base64") {
		t.Errorf("bad base64: %d %s", st, body)
	}

	var created struct{ ID string }
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", map[string]any{"policy": "default"}, &created); st != 201 {
		t.Fatalf("POST /v1/sessions: %d %s", st, b)
	}
	st, b := s.jsonDo(t, "POST", "/v1/sessions/"+created.ID+"/cells", map[string]any{"code": "print(1)", "stdin_base64": "eA=="}, nil)
	if st != 400 || !strings.Contains(string(b), "stdin_base64: a session's cells have no standard input") {
		t.Errorf("a cell with stdin_base64: %d %s", st, b)
	}
	if r := s.cell(t, created.ID, "import sys\nprint(repr(sys.stdin.read()))"); r.Status != result.StatusOK || r.Stdout != "''\n" {
		t.Errorf("a cell's stdin: %s %q", r.Status, r.Stdout)
	}
	s.jsonDo(t, "DELETE", "/v1/sessions/"+created.ID, nil, nil)

	server := "unix:" + s.sock
	prog := writeTemp(t, "hash.py", []byte(hashProgram))
	o := nsbox(t, run{args: []string{"run", "--server", server, "--stdin", writeTemp(t, "in.bin", data), prog}})
	if o.exit != 0 || string(o.stdout) != hashLine(data) {
		t.Errorf("nsbox run --server --stdin FILE: exit %d, stdout %q, stderr %q", o.exit, o.stdout, o.stderr)
	}
	o = nsbox(t, run{args: []string{"run", "--server", server, "--stdin", "-", "-c", "print(input()[::-1])"}, stdin: "abc\n"})
	if o.exit != 0 || string(o.stdout) != "cba\n" {
		t.Errorf("nsbox run --server --stdin -: exit %d, stdout %q, stderr %q", o.exit, o.stdout, o.stderr)
	}
	o = nsbox(t, run{args: []string{"run", "--server", server, "--stdin", "-", "-"}, stdin: "print(1)\n"})
	if o.exit != result.ExitSandboxError || !bytes.Contains(o.stderr, []byte("--stdin -: the program is read from standard input")) {
		t.Errorf("--server, --stdin - with the program on stdin: exit %d, stderr %q", o.exit, o.stderr)
	}

	if code := s.stopAndWait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM\n%s", code, s.logText())
	}
	s.nothingLeft(t)
}
