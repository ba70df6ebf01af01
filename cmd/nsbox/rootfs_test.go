package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/internal/mustwork"
)

// runRootfs runs `nsbox rootfs ARGS` and returns its stdout, stderr and
// exit code.
func runRootfs(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:      "nsbox",
		Commands:  []*cli.Command{rootfsCommand()},
		Writer:    &out,
		ErrWriter: &errOut,
		// Return the exit code instead of exiting the test binary.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run(append([]string{"nsbox", "rootfs"}, args...)); err != nil {
		return out.String(), errOut.String(), exitCode(err)
	}
	return out.String(), errOut.String(), 0
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var o map[string]any
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		objs = append(objs, o)
	}
	return objs
}

func TestRootfsBuildAndVerify(t *testing.T) {
	mustwork.NeedRoot(t)
	mustwork.NeedPath(t, "/usr/bin/python3.11")
	dir := filepath.Join(t.TempDir(), "base")

	// Standard output is not a terminal here: JSON lines even without --json.
	out, errOut, code := runRootfs(t, "build", "--python", "/usr/bin/python3.11", "--out", dir)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", code, out, errOut)
	}
	lines := jsonLines(t, out)
	if len(lines) < 10 || lines[0]["step"] != "inspect interpreter" {
		t.Errorf("progress:\n%s", out)
	}
	done := lines[len(lines)-1]
	var keys []string
	for k := range done {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"bytes", "done", "elapsed_ms", "files", "generation", "kept", "packages", "python", "python_version"}; !slices.Equal(keys, want) {
		t.Errorf("summary keys %v, want %v", keys, want)
	}
	gen, err := filepath.EvalSymlinks(dir)
	if done["done"] != true || done["python"] != "/venv/bin/python" || done["generation"] != gen || len(done["kept"].([]any)) != 0 {
		t.Errorf("summary %v, want generation %s and nothing kept", done, gen)
	}

	// A clean root: exit 0, in both formats.
	out, _, code = runRootfs(t, "verify", "--json", dir)
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("verify --json: exit %d, %v\n%s", code, err, out)
	}
	keys = keys[:0]
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"extra", "generation", "missing", "modified", "ok", "root"}; !slices.Equal(keys, want) || v["ok"] != true || v["root"] != dir || v["generation"] != gen {
		t.Errorf("verify --json: %v", v)
	}
	if !strings.Contains(out, `"missing": []`) {
		t.Errorf("empty lists are not []:\n%s", out)
	}
	if out, _, code := runRootfs(t, "verify", dir); code != 0 || out != dir+": matches its manifest\n" {
		t.Errorf("verify: exit %d, %q", code, out)
	}

	// Damage: one of each kind.
	lib := filepath.Join(dir, "usr/lib/python3.11")
	f, err := os.OpenFile(filepath.Join(lib, "json/decoder.py"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("#")
	f.Close()
	if err := os.Remove(filepath.Join(lib, "csv.py")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "evil.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = runRootfs(t, "verify", "--json", dir)
	var r struct {
		OK                       bool
		Missing, Modified, Extra []string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitRootfsFailed || r.OK ||
		!slices.Equal(r.Missing, []string{"/usr/lib/python3.11/csv.py"}) ||
		!slices.Equal(r.Modified, []string{"/usr/lib/python3.11/json/decoder.py"}) ||
		!slices.Equal(r.Extra, []string{"/usr/lib/python3.11/evil.py"}) {
		t.Errorf("verify --json of a damaged root: exit %d, %v\n%s", code, err, out)
	}
	out, _, code = runRootfs(t, "verify", dir)
	want := "missing   /usr/lib/python3.11/csv.py\n" +
		"modified  /usr/lib/python3.11/json/decoder.py\n" +
		"extra     /usr/lib/python3.11/evil.py\n" +
		dir + ": 1 missing, 1 modified, 1 extra\n"
	if code != exitRootfsFailed || out != want {
		t.Errorf("verify: exit %d\n%s\nwant\n%s", code, out, want)
	}
}

func TestRootfsErrors(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "bad.lock")
	if err := os.WriteFile(lock, []byte("# pins\nnumpy>=1 --hash=sha256:"+strings.Repeat("a", 64)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "root")
	for _, tc := range []struct {
		args    []string
		code    int
		wantOut string // in the last {"error"} line, or in stdout
		wantErr string // in stderr
	}{
		{[]string{"build", "--json", "--python", "/usr/bin/python3.11", "--out", out, "--lock", lock}, 1, lock + ":2: numpy: ", ""},
		{[]string{"build", "--python", "/usr/bin/python3.11", "--out", out, "--lock", lock}, 1, lock + ":2: numpy: ", "nsbox: rootfs build: " + lock + ":2: numpy: "},
		{[]string{"build", "--json", "--out", out}, 1, "--python is required", ""},
		{[]string{"build", "--json", "--python", "/nonexistent/python", "--out", out}, 1, "/nonexistent/python", ""},
		{[]string{"build", "--no-such-flag"}, 1, "", ""},
		{[]string{"verify", "--json", filepath.Join(out, "nope")}, 1, `"error": "rootfs: resolve root: lstat ` + filepath.Join(out, "nope"), ""},
		{[]string{"verify", filepath.Join(out, "nope")}, 1, "cannot verify", ""},
		{[]string{"verify"}, 125, "", ""},
		{[]string{"build", "--json", "--from", filepath.Join(out, "parent"), "--out", out}, 1, "--from needs --lock", ""},
		{[]string{"remove", filepath.Join(out, "nope")}, 1, "", ""},
		{[]string{"remove"}, 1, "", ""},
	} {
		stdout, stderr, code := runRootfs(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.wantOut) || !strings.Contains(stderr, tc.wantErr) {
			t.Errorf("rootfs %v: exit %d (want %d)\nstdout %s\nstderr %s", tc.args, code, tc.code, stdout, stderr)
		}
		if slices.Contains(tc.args, "build") && slices.Contains(tc.args, "--json") {
			lines := jsonLines(t, stdout)
			if len(lines) == 0 || lines[len(lines)-1]["error"] == nil || len(lines[len(lines)-1]) != 1 {
				t.Errorf("rootfs %v: last line is not {\"error\": ...}:\n%s", tc.args, stdout)
			}
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed build created %s: %v", out, err)
	}
}
