package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestAllowlistBypassAttempts runs the known routes around an import
// allowlist through the real binary under the built-in strict policy. Each
// either never runs (a static violation: the canary line first in the
// program is not written) or is refused while running and recorded. The
// payloads only read; the OS sandbox would stop them anyway.
func TestAllowlistBypassAttempts(t *testing.T) {
	needRoot(t)
	cases := []struct {
		name, code string
		static     bool   // refused before anything ran
		violation  string // a violation name the result must list
	}{
		{"direct import", "import os", true, "os"},
		{"from import", "from os import path", true, "os"},
		{"relative import", "from . import sibling", true, "."},
		{"__import__", `__import__("os")`, true, "__import__"},
		{"importlib computed", `import importlib; importlib.import_module("o" + "s")`, true, "importlib"},
		{"exec", `exec("import os")`, true, "exec"},
		{"getattr on builtins", `getattr(__builtins__, "__imp" + "ort__")("os")`, true, "getattr"},
		{"sys.modules", `import sys; sys.modules["os"]`, true, "sys"},
		{"subclass walk", `[c for c in ().__class__.__bases__[0].__subclasses__() if c.__name__ == "_wrap_close"]`, true, "__subclasses__"},
		{"underscore module attribute", "import random; random._os", true, "_os"},
		{"module through a module", "import json; json.codecs.sys", false, "codecs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := sandboxWorkspace(t)
			code := "open('/workspace/ran', 'w').close()\n" + tc.code + "\n"
			o := nsbox(t, run{args: []string{"run", "--json", "--policy", "strict", "--workspace", ws, "-c", code}})
			o.wantStatus(t, result.StatusPolicyViolation)
			_, err := os.Stat(filepath.Join(ws, "ran"))
			if ran := err == nil; ran == tc.static {
				t.Errorf("program ran: %v, want %v (static: %v)", ran, !tc.static, tc.static)
			}
			found := false
			for _, v := range o.res.Violations {
				found = found || v.Name == tc.violation
				if v.Line != 0 && v.Line != 2 {
					t.Errorf("violation %+v is not on line 2", v)
				}
			}
			if !found {
				t.Errorf("violations %+v do not name %q", o.res.Violations, tc.violation)
			}
			if o.exit != result.ExitPolicyViolation {
				t.Errorf("exit %d, want %d", o.exit, result.ExitPolicyViolation)
			}
		})
	}
}

// TestAllowlistReportsEverythingAtOnce: every violation of a program comes
// back in one result with its line, and a syntax error names its line.
func TestAllowlistReportsEverythingAtOnce(t *testing.T) {
	needRoot(t)
	o := runPyLayer(t, "strict", "import math\nimport os\nimport socket, ctypes\nx = eval('1')\n")
	o.wantStatus(t, result.StatusPolicyViolation)
	got := map[string]int{}
	for _, v := range o.res.Violations {
		got[v.Name] = v.Line
	}
	for name, line := range map[string]int{"os": 2, "socket": 3, "ctypes": 3, "eval": 4} {
		if got[name] != line {
			t.Errorf("violation %q on line %d, want %d (all: %+v)", name, got[name], line, o.res.Violations)
		}
	}
	if _, ok := got["math"]; ok {
		t.Errorf("math is allowed under strict: %+v", o.res.Violations)
	}

	o = runPyLayer(t, "strict", "x = 1\ny = (\nprint(x)\n")
	o.wantStatus(t, result.StatusError)
	if !strings.Contains(o.res.Stderr, "SyntaxError") || !strings.Contains(o.res.Stderr, "line 2") {
		t.Errorf("syntax error without its line: %q", o.res.Stderr)
	}
}

// TestRuntimeLayerDefault: the default policy lets a program import os but
// refuses os.system at run time (PermissionError, recorded); a program
// that catches the refusal goes on and ends ok with the violation listed.
func TestRuntimeLayerDefault(t *testing.T) {
	needRoot(t)
	o := runPyLayer(t, "default", "import os\ntry:\n    os.system('true')\nexcept PermissionError as e:\n    print('refused:', e)\n")
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(o.res.Stdout, "refused:") || len(o.res.Violations) != 1 ||
		o.res.Violations[0].Kind != result.ViolationEvent || o.res.Violations[0].Name != "os.system" || o.res.Violations[0].Line != 3 {
		t.Errorf("stdout %q violations %+v, want os.system refused on line 3 and recorded", o.res.Stdout, o.res.Violations)
	}
	// The runner's frames never show in the program's traceback.
	o = runPyLayer(t, "default", "def f():\n    raise ValueError('boom')\nf()\n")
	o.wantStatus(t, result.StatusError)
	if !strings.Contains(o.res.Stderr, `File "<program>", line 3`) || strings.Count(o.res.Stderr, "File \"") != 2 {
		t.Errorf("traceback %q, want exactly the program's two frames", o.res.Stderr)
	}
}

// TestCheckCommand: nsbox check runs only the static check; it prints
// FILE:LINE:COL lines and exits 1 on violations, 0 when clean, and the
// program never runs.
func TestCheckCommand(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.py")
	os.WriteFile(bad, []byte("import math\nimport subprocess\nsubprocess.run(['true'])\n"), 0o644)
	o := nsbox(t, run{args: []string{"check", "--policy", "default", bad}})
	if o.exit != 1 || !strings.Contains(string(o.stdout), bad+":2:7: import subprocess:") {
		t.Errorf("check: exit %d stdout %q, want exit 1 and %s:2:7", o.exit, o.stdout, bad)
	}
	o = nsbox(t, run{args: []string{"check", "--policy", "default", "--json", "-c", "import math\nprint(math.pi)\n"}})
	var rep struct {
		OK         bool               `json:"ok"`
		Violations []result.Violation `json:"violations"`
	}
	if err := json.Unmarshal(o.stdout, &rep); err != nil || o.exit != 0 || !rep.OK || len(rep.Violations) != 0 {
		t.Errorf("check clean: exit %d %q (%v), want exit 0 and ok", o.exit, o.stdout, err)
	}
	if strings.Contains(string(o.stdout)+string(o.stderr), "3.14") {
		t.Error("check ran the program")
	}
}

// TestRefusedImportSaysWhy: the static check's refusal of an import says
// whether the root has the module (installed but not allowed, or not
// installed at all) and lists what the policy allows, the root's
// packages first.
func TestRefusedImportSaysWhy(t *testing.T) {
	needRoot(t)
	o := runPyLayer(t, "default", "import numpy, socket\n")
	o.wantStatus(t, result.StatusPolicyViolation)
	want := map[string]string{
		"numpy":  "no module 'numpy' is installed in this root (allowed: from the standard library abc,",
		"socket": "it is installed but not in allowlist.imports (allowed: from the standard library abc,",
	}
	for _, v := range o.res.Violations {
		if w, ok := want[v.Name]; ok && strings.Contains(v.Detail, w) {
			delete(want, v.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("violations %+v lack %v", o.res.Violations, want)
	}
	o = runPyLayer(t, "datasci", "import torch\n")
	o.wantStatus(t, result.StatusPolicyViolation)
	if len(o.res.Violations) != 1 || !strings.Contains(o.res.Violations[0].Detail, "no module 'torch' is installed in this root (allowed: packages PIL, cloudpickle,") {
		t.Errorf("datasci, import torch: %+v", o.res.Violations)
	}
}

// TestPolicyShowPackages: `nsbox policy show --packages` lists the
// root's installed modules by whether the policy allows them, from the
// root's manifest.
func TestPolicyShowPackages(t *testing.T) {
	needRoot(t)
	pol := filepath.Join(t.TempDir(), "nonumpy.toml")
	if err := os.WriteFile(pol, []byte("extends = \"datasci\"\n[allowlist]\nimports_remove = [\"numpy\"]\npreload_remove = [\"numpy\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		policy           string
		allowed, refused []string
	}{
		{"datasci", []string{"matplotlib", "numpy", "pandas"}, nil},
		{pol, []string{"matplotlib", "pandas"}, []string{"numpy"}},
		{"default", nil, nil},
	} {
		o := nsbox(t, run{args: []string{"policy", "show", "--packages", "--json", c.policy}})
		var got struct {
			Root       string   `json:"root"`
			Packages   []string `json:"packages"`
			Allowed    []string `json:"allowed"`
			NotAllowed []string `json:"not_allowed"`
		}
		if err := json.Unmarshal(o.stdout, &got); err != nil || o.exit != 0 {
			t.Fatalf("policy show --packages %s: exit %d %v\n%s%s", c.policy, o.exit, err, o.stdout, o.stderr)
		}
		for _, m := range c.allowed {
			if !slices.Contains(got.Allowed, m) {
				t.Errorf("%s: allowed %q lacks %s", c.policy, got.Allowed, m)
			}
		}
		if !slices.Equal(got.NotAllowed, c.refused) && !(len(got.NotAllowed) == 0 && c.refused == nil) {
			t.Errorf("%s: not_allowed %q, want %q", c.policy, got.NotAllowed, c.refused)
		}
		if c.policy == "default" && (len(got.Allowed) != 0 || len(got.Packages) != 0) {
			t.Errorf("default (base root): %+v, want no packages", got)
		}
	}
	o := nsbox(t, run{args: []string{"policy", "show", "--packages", "datasci"}})
	if o.exit != 0 || !strings.Contains(string(o.stdout), "importable (installed and allowed): PIL, ") {
		t.Errorf("policy show --packages datasci: exit %d\n%s%s", o.exit, o.stdout, o.stderr)
	}
}
