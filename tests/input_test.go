package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestBadInput: every bad input gets the right status, exit code and a
// message naming the culprit, and leaves nothing behind.
func TestBadInput(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	policy := func(name, root, extra string) string {
		return write(name, `
[python]
root = "`+root+`"
verify = "quick"
[limits]
timeout = "10s"
output_limit = "64KiB"
memory = "256MiB"
pids = 32
cpus = 1
cpu_time = "10s"
open_files = 256
file_size = "16MiB"
stack = "8MiB"
workspace_size = "64MiB"
workspace_inodes = 4096
program_size = "1MiB"
`+extra+`
[filesystem]
tmp_size = "16MiB"
shm_size = "8MiB"
[sandbox]
require = ["namespaces", "cgroups", "seccomp"]
seccomp = "strict"
landlock = true
[allowlist]
imports = ["*"]
deny_builtins = []
deny_events = []
strict_attributes = false
[audit]
store_code = false
`)
	}
	empty := write("empty.py", "")
	typo := policy("typo.toml", "base", "timout = \"5s\"")
	missingRoot := policy("noroot.toml", filepath.Join(dir, "no-such-root"), "")
	relativeRoot := policy("relroot.toml", "roots/base", "")
	notRoot := policy("notroot.toml", dir, "") // a directory without a manifest
	roWS := filepath.Join(dir, "readonly-ws")
	os.Mkdir(roWS, 0o755)

	cases := []struct {
		name      string
		args      []string
		status    result.Status
		exit      int
		step      string
		mentions  string
		wantError bool
	}{
		{"missing file", []string{filepath.Join(dir, "nope.py")}, result.StatusSandboxError, 125, "input", "nope.py", true},
		{"empty code", []string{empty}, result.StatusSandboxError, 125, "input", "empty", true},
		{"empty -c", []string{"-c", ""}, result.StatusSandboxError, 125, "input", "empty", true},
		{"no program", nil, result.StatusSandboxError, 125, "input", "no program", true},
		{"policy typo", []string{"--policy", typo, "-c", "pass"}, result.StatusSandboxError, 125, "policy", "timout", true},
		{"unknown policy", []string{"--policy", "strcit", "-c", "pass"}, result.StatusSandboxError, 125, "policy", "strcit", true},
		{"root missing", []string{"--policy", missingRoot, "-c", "pass"}, result.StatusSandboxError, 125, "rootfs", "no-such-root", true},
		{"root relative", []string{"--policy", relativeRoot, "-c", "pass"}, result.StatusSandboxError, 125, "policy", "roots/base", true},
		{"not a root", []string{"--policy", notRoot, "-c", "pass"}, result.StatusSandboxError, 125, "rootfs", dir, true},
		{"audit log unwritable", []string{"--audit-db", "/proc/nsbox-no-such/audit.db", "-c", "pass"}, result.StatusSandboxError, 125, "audit", "/proc/nsbox-no-such", true},
		{"unwritable workspace", []string{"--workspace", roWS, "-c", "pass"}, result.StatusSandboxError, 125, "workspace", roWS, true},
		{"missing workspace", []string{"--workspace", filepath.Join(dir, "nows"), "-c", "pass"}, result.StatusSandboxError, 125, "workspace", "nows", true},
		{"timeout widened", []string{"--policy", "strict", "--timeout", "1h", "-c", "pass"}, result.StatusSandboxError, 125, "policy", "1h", true},
		{"output limit widened", []string{"--policy", "strict", "--output-limit", "1GiB", "-c", "pass"}, result.StatusSandboxError, 125, "policy", "output", true},
		{"label not UTF-8", []string{"--label", "k=caf\xe9", "-c", "pass"}, result.StatusSandboxError, 125, "input", "UTF-8", true},
		{"too many labels", append(manyLabelFlags(33), "-c", "pass"), result.StatusSandboxError, 125, "input", "at most 32 labels", true},
		{"syntax error", []string{"-c", "def f(:\n  pass"}, result.StatusError, 1, "", "SyntaxError", false},
		{"exit code", []string{"-c", "raise SystemExit(3)"}, result.StatusError, 3, "", "", false},
		// A real fault ends the program by its own signal (SIGSEGV).
		{"killed by own signal", []string{"--policy", osOnly(t, "default"), "-c", "import ctypes; ctypes.string_at(0)"}, result.StatusError, 139, "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := nsbox(t, run{args: append([]string{"run", "--json"}, tc.args...)})
			o.wantStatus(t, tc.status)
			if o.exit != tc.exit {
				t.Errorf("exit %d, want %d", o.exit, tc.exit)
			}
			if tc.wantError {
				if o.res.Error == nil || o.res.Error.Step != tc.step || !strings.Contains(o.res.Error.Message, tc.mentions) {
					t.Errorf("error %+v, want step %q mentioning %q", o.res.Error, tc.step, tc.mentions)
				}
				if strings.Contains(o.res.Error.Message, "\n") {
					t.Errorf("error message is not one line: %q", o.res.Error.Message)
				}
			} else if !strings.Contains(o.res.Stderr, tc.mentions) {
				t.Errorf("stderr %q, want it to mention %q", o.res.Stderr, tc.mentions)
			}
			o.noLeftovers(t)
			if tc.step != "audit" && o.exit != 0 {
				// Every attempt has its row, refused ones too.
				rows := auditRows(t, filepath.Join(o.state, "audit.db"))
				if len(rows) != 1 || rows[0]["status"] != string(tc.status) {
					t.Errorf("audit rows %v, want one with status %s", rows, tc.status)
				}
			}

			// Plain mode: the same exit code and one line on stderr.
			p := nsbox(t, run{args: append([]string{"run"}, tc.args...)})
			if p.exit != tc.exit {
				t.Errorf("plain mode exit %d, want %d", p.exit, tc.exit)
			}
			if tc.wantError && strings.Count(strings.TrimSpace(string(p.stderr)), "\n") != 0 {
				t.Errorf("plain mode stderr is not one line: %q", p.stderr)
			}
		})
	}
}

// TestCodeSources runs the same program from -c, a file and stdin.
func TestCodeSources(t *testing.T) {
	needRoot(t)
	file := filepath.Join(t.TempDir(), "prog.py")
	os.WriteFile(file, []byte("print(6*7)\n"), 0o644)
	for _, r := range []run{
		{args: []string{"run", "-c", "print(6*7)"}},
		{args: []string{"run", file}},
		{args: []string{"run", "--policy", "strict", "-"}, stdin: "print(6*7)\n"},
		{args: []string{"run", "--policy", "strict.toml", "-"}, stdin: "print(6*7)\n"},
		{args: []string{"run", "--policy", "permissive", "-c", "print(6*7)"}},
	} {
		o := nsbox(t, r)
		if o.exit != 0 || string(o.stdout) != "42\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 42", r.args, o.exit, o.stdout, o.stderr)
		}
	}
}

// manyLabelFlags returns n distinct --label flags.
func manyLabelFlags(n int) []string {
	var out []string
	for i := range n {
		out = append(out, "--label", fmt.Sprintf("k%d=v", i))
	}
	return out
}

// TestRepeatedFlagsRefused: a second -c, --policy or --timeout would
// silently replace the first; it is refused, naming the flag.
func TestRepeatedFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-c", "print(1)", "-c", "print(2)"},
		{"--code", "print(1)", "-c", "print(2)"},
		{"--policy", "strict", "-p", "default", "-c", "pass"},
		{"--timeout", "1s", "--timeout", "2s", "-c", "pass"},
		{"--workspace", "/tmp", "--workspace", "/tmp", "-c", "pass"},
	} {
		o := nsbox(t, run{args: append([]string{"run", "--json"}, args...)})
		o.wantStatus(t, result.StatusSandboxError)
		if o.exit != 125 || o.res.Error == nil || o.res.Error.Step != "input" || !strings.Contains(o.res.Error.Message, "more than once") {
			t.Errorf("%q: exit %d, error %+v; want 125, step input, \"more than once\"", args, o.exit, o.res.Error)
		}
		if p := nsbox(t, run{args: append([]string{"check"}, args...)}); p.exit == 0 && args[0] != "--timeout" && args[0] != "--workspace" {
			t.Errorf("nsbox check %q: exit 0, want the repeated flag refused", args)
		}
	}
}

// TestUsageErrorJSON: with --json even a wrong command line yields one
// result object.
func TestUsageErrorJSON(t *testing.T) {
	o := nsbox(t, run{args: []string{"run", "--json", "--no-such-flag", "-c", "pass"}})
	o.wantStatus(t, result.StatusSandboxError)
	if o.exit != 125 || o.res.Error == nil || o.res.Error.Step != "input" || !strings.Contains(o.res.Error.Message, "no-such-flag") || o.res.ID == "" {
		t.Errorf("exit %d, result %+v", o.exit, o.res)
	}
}

// TestProgramInputBounded: the program is read within bounds. A device or
// a FIFO is refused without being read (before, /dev/zero was read until
// nsbox ran out of memory, and a FIFO without a writer blocked forever); a
// program over limits.program_size is refused after reading one byte more
// than the limit; standard input that never ends is given up on at the
// run's timeout. Each is bad input: step input, exit 125, a row.
func TestProgramInputBounded(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.py")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	smallPrograms := filepath.Join(dir, "small.toml")
	if err := os.WriteFile(smallPrograms, []byte("extends = \"strict\"\n[limits]\nprogram_size = \"1KiB\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mentions string
		args           []string
	}{
		{"device", "not a regular file (a device)", []string{"/dev/zero"}},
		{"fifo", "not a regular file (a FIFO)", []string{fifo}},
		{"too big", "larger than 1MiB", []string{big}},
		// An argument cannot hold a MiB: a policy with a smaller limit.
		{"-c too big", "larger than 1KiB", []string{"--policy", smallPrograms, "-c", strings.Repeat("#", 1025)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			args := append([]string{"run", "--json"}, tc.args...)
			if tc.args[0] != "--policy" {
				args = append([]string{"run", "--json", "--policy", "strict"}, tc.args...)
			}
			o := nsbox(t, run{args: args})
			o.wantStatus(t, result.StatusSandboxError)
			if o.exit != 125 || o.res.Error == nil || o.res.Error.Step != "input" || !strings.Contains(o.res.Error.Message, tc.mentions) {
				t.Errorf("exit %d, error %+v; want 125, step input, %q", o.exit, o.res.Error, tc.mentions)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("refusing took %v", time.Since(start))
			}
			if rows := auditRows(t, filepath.Join(o.state, "audit.db")); len(rows) != 1 {
				t.Errorf("audit rows %v, want the refusal recorded", rows)
			}
		})
	}

	t.Run("stdin never ends", func(t *testing.T) {
		state := t.TempDir()
		cmd := exec.Command(nsboxBin, "run", "--json", "--policy", "strict", "--timeout", "1s", "-")
		cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+filepath.Join(state, "audit.db"))
		r, w, err := os.Pipe() // the write end stays open: stdin never ends
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		cmd.Stdin = r
		var out bytes.Buffer
		cmd.Stdout = &out
		start := time.Now()
		cmd.Run()
		r.Close()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("nsbox waited %v for a program on stdin, want about the 1s timeout", d)
		}
		if !strings.Contains(out.String(), `"step":"input"`) || !strings.Contains(out.String(), "did not end within 1s") {
			t.Errorf("result %s, want step input naming the timeout", out.String())
		}
	})
}
