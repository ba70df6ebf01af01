package tests

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/result"
)

// TestHostEnvironmentInvisible sets a secret in nsbox's environment and
// checks the program's environment is exactly the documented one.
func TestHostEnvironmentInvisible(t *testing.T) {
	needRoot(t)
	code := `import json, os; print(json.dumps(dict(os.environ)))`
	o := nsbox(t, run{args: []string{"run", "--json", "-c", code}, env: []string{"NSBOX_TEST_SECRET=hunter2-canary"}})
	o.wantStatus(t, result.StatusOK)
	var env map[string]string
	if err := json.Unmarshal([]byte(o.res.Stdout), &env); err != nil {
		t.Fatalf("bad output %q: %v", o.res.Stdout, err)
	}
	want := map[string]string{
		"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/workspace", "LANG": "C.UTF-8",
		"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
		// Thread pools sized to the default policy's one CPU.
		"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s=%q, want %q", k, env[k], v)
		}
	}
	for k, v := range env {
		if _, ok := want[k]; !ok && k != "LC_CTYPE" { // Python's C-locale coercion may add LC_CTYPE
			t.Errorf("unexpected variable %s=%q inside", k, v)
		}
		if strings.Contains(v, "hunter2") {
			t.Errorf("host secret leaked in %s", k)
		}
	}
}

// TestPolicyEnv adds a variable through a policy's [env] table.
func TestPolicyEnv(t *testing.T) {
	needRoot(t)
	b, err := os.ReadFile("../policies/default.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "env.toml")
	os.WriteFile(p, append(b, []byte("\n[env]\nMPLBACKEND = \"Agg\"\n")...), 0o644)
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", p, "-c", "import os; print(os.environ['MPLBACKEND'])"}})
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "Agg\n" || o.res.Policy != p {
		t.Errorf("stdout %q policy %q", o.res.Stdout, o.res.Policy)
	}
}

// TestNonUTF8Output: invalid UTF-8 survives exactly in stdout_base64.
func TestNonUTF8Output(t *testing.T) {
	needRoot(t)
	o := runPy(t, "default", `import sys; sys.stdout.buffer.write(b"ok \xff\xfe end")`)
	o.wantStatus(t, result.StatusOK)
	raw, err := base64.StdEncoding.DecodeString(o.res.StdoutBase64)
	if err != nil || string(raw) != "ok \xff\xfe end" {
		t.Errorf("stdout_base64 %q decodes to %q, %v", o.res.StdoutBase64, raw, err)
	}
	if o.res.Stdout != "ok \uFFFD end" { // one U+FFFD per invalid run
		t.Errorf("stdout %q, want U+FFFD replacements", o.res.Stdout)
	}
}

// TestJSONResultShape checks the documented fields of an ok result.
func TestJSONResultShape(t *testing.T) {
	needRoot(t)
	o := runPyLayer(t, "strict", `print("hi")`)
	o.wantStatus(t, result.StatusOK)
	r := o.res
	if r.Schema != 1 || len(r.ID) == 0 || r.ExitCode == nil || *r.ExitCode != 0 || r.Signal != nil ||
		r.Stdout != "hi\n" || r.Policy != "strict" || r.DurationMS <= 0 || r.Error != nil || r.Violations == nil {
		t.Errorf("unexpected result %+v", r)
	}
	var raw map[string]any
	json.Unmarshal(o.stdout, &raw)
	for _, k := range []string{"schema", "id", "status", "exit_code", "signal", "stdout", "stderr",
		"stdout_truncated", "stderr_truncated", "duration_ms", "policy", "violations"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("result lacks %q: %s", k, o.stdout)
		}
	}
}

// TestTracePhases: --trace-phases lists the run's steps in order: the
// command's own before and after the supervisor's, which account for the
// run's duration, with the init's setup steps ("init: ...") before
// "ready"; without it there are none.
func TestTracePhases(t *testing.T) {
	needRoot(t)
	o := runPy(t, "default", "pass", "--trace-phases")
	o.wantStatus(t, result.StatusOK)
	var names, initSteps []string
	var sum float64
	for i, p := range o.res.Phases {
		if step, ok := strings.CutPrefix(p.Name, "init: "); ok {
			initSteps = append(initSteps, step)
		} else {
			names = append(names, p.Name)
		}
		if i >= 6 && i < len(o.res.Phases)-2 { // from the supervisor's first step to its cleanup
			sum += p.MS
		}
	}
	want := []string{"start-up", "policy and input", "plan", "read program", "root build", "audit begin",
		"rootfs", "state dir", "ids", "workspace", "seccomp", "cgroup", "mounts", "report pipe", "spec", "start init",
		"audit row", "ready", "exec", "program", "collect", "cleanup",
		"audit finish", "audit close"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", names, want)
	}
	// The init's steps, in the order the init runs them (landlock only
	// where the kernel has it).
	wantInit := "runtime start,check namespaces,read spec,cgroup attach,wait for go,userns limits,make / private," +
		"attach root,binds,mount /tmp,mount /dev,mount /proc,pivot_root,check / read-only,sethostname," +
		"loopback up,setsid,drop bounding set,drop uid/gid,clear capabilities,re-arm pdeathsig," +
		"verify cwd,close fds,rlimits,no_new_privs"
	if got := strings.TrimSuffix(strings.Join(initSteps, ","), ",landlock"); got != wantInit {
		t.Errorf("init steps %s, want %s[,landlock]", got, wantInit)
	}
	if d := float64(o.res.DurationMS); sum < d-2 || sum > d+2 {
		t.Errorf("the supervisor's phases sum to %.1f ms, the run took %d ms", sum, o.res.DurationMS)
	}
	if p := runPy(t, "default", "pass").res.Phases; p != nil {
		t.Errorf("phases without --trace-phases: %v", p)
	}
}

// TestLocale: the program's locale is the C.UTF-8 its LANG names, as on
// a normal system: setlocale(LC_ALL, "") works (the root carries glibc's
// C.utf8), and text round-trips in UTF-8.
func TestLocale(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat("/usr/lib/locale/C.utf8"); err != nil {
		mustwork.Skip(t, "the host has no C.utf8 locale to put in the root: %v", err)
	}
	o := runPyLayer(t, "default", "import locale\nprint(locale.setlocale(locale.LC_ALL, ''))\nprint(locale.getpreferredencoding(False), 'é'.upper())\n")
	o.wantStatus(t, result.StatusOK)
	if want := "C.UTF-8\nUTF-8 É\n"; o.res.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %s)", o.res.Stdout, want, o.res.Stderr)
	}
}
