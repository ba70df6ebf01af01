package pyrunner

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// want is a violation a case must report (line 0: any line).
type want struct {
	kind, name string
	line       int
	runtime    bool
}

// TestBypassAttempts runs the known routes around an import allowlist and
// checks each outcome. {CANARY} is a file the program writes, as a quoted
// Python string: where the static check must stop the program it is on the
// first line, to prove nothing ran; where the run time must stop an attempt
// it follows the attempt, to prove the attempt raised.
func TestBypassAttempts(t *testing.T) {
	requirePython(t)
	for _, tc := range bypassCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "canary")
			prog := strings.ReplaceAll(tc.prog, "{CANARY}", strconv.Quote(path))
			r := runProgram(t, tc.cfg, prog, dir)
			if r.exit != tc.exit || r.report.Static != tc.static {
				t.Fatalf("exit %d, static %q; want %d, %q\n%s", r.exit, r.report.Static, tc.exit, tc.static, r)
			}
			for _, w := range tc.want {
				if !hasViolation(r.report, w) {
					t.Errorf("no violation %+v\n%s", w, r)
				}
			}
			if tc.static == StaticViolations && (r.report.Count != len(r.report.StaticViolations()) ||
				r.report.Count != len(tc.want)) {
				t.Errorf("count %d, %d static lines, want %d\n%s",
					r.report.Count, len(r.report.StaticViolations()), len(tc.want), r)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q\n%s", tc.stderr, r)
			}
			if _, err := os.Stat(path); (err == nil) != tc.ran {
				t.Errorf("canary exists: %v, want %v\n%s", err == nil, tc.ran, r)
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
}

// bypassCase is one attempt: the program ({CANARY} as in
// TestBypassAttempts) under cfg, and what must come of it.
type bypassCase struct {
	name   string
	cfg    Config
	prog   string
	exit   int
	static string
	want   []want
	stderr string // a substring of stderr
	ran    bool   // whether the canary must exist
}

// bypassCases are the known routes around an import allowlist.
func bypassCases() []bypassCase {
	strict := strictConfig()
	// Imports checked at run time, builtins all there: what exec'd code meets.
	noBuiltinDenial := Config{Mode: ModeRun, Allow: StrictAllow}
	withImportlib := with(strict, func(c *Config) { c.Allow = plus(StrictAllow, "importlib") })
	withCodecs := with(strict, func(c *Config) { c.Allow = plus(StrictAllow, "codecs") })
	defaultLike := Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}

	const canary = "open({CANARY}, \"w\").write(\"ran\")\n"
	return []bypassCase{
		// Static: each stops the program before its first line.
		{"import os", strict, canary + "import os\nos.system('true')\n",
			ExitPolicyViolation, StaticViolations, []want{{"import", "os", 2, false}}, "import of 'os'", false},
		{"from os import path", strict, canary + "from os import path\n",
			ExitPolicyViolation, StaticViolations, []want{{"import", "os", 2, false}}, "", false},
		{"import os.path as p", strict, canary + "import os.path as p\n",
			ExitPolicyViolation, StaticViolations, []want{{"import", "os", 2, false}}, "", false},
		{"relative import", strict, canary + "from . import x\nfrom ..pkg import y\n",
			ExitPolicyViolation, StaticViolations,
			[]want{{"import", ".", 2, false}, {"import", "..pkg", 3, false}}, "relative import", false},
		{"__import__ literal", strict, canary + "__import__('os')\n",
			ExitPolicyViolation, StaticViolations,
			[]want{{"builtin", "__import__", 2, false}, {"import", "os", 2, false}}, "", false},
		{"importlib folded name", strict, canary + "import importlib\nimportlib.import_module('o' + 's')\n",
			ExitPolicyViolation, StaticViolations,
			[]want{{"import", "importlib", 2, false}, {"import", "os", 3, false}}, "", false},
		{"importlib alias", withImportlib, canary + "from importlib import import_module as im\nim('subprocess')\n",
			ExitPolicyViolation, StaticViolations, []want{{"import", "subprocess", 3, false}}, "", false},
		{"exec string", strict, canary + "exec('import os')\n",
			ExitPolicyViolation, StaticViolations, []want{{"builtin", "exec", 2, false}}, "", false},
		{"getattr on __builtins__", strict, canary + "getattr(__builtins__, '__imp' + 'ort__')('os')\n",
			ExitPolicyViolation, StaticViolations, []want{
				{"builtin", "getattr", 2, false}, {"attribute", "__builtins__", 2, false},
				{"attribute", "__import__", 2, false}}, "", false},
		{"__builtins__ subscript", strict, canary + "__builtins__['__import__']('os')\n",
			ExitPolicyViolation, StaticViolations, []want{
				{"attribute", "__builtins__", 2, false}, {"attribute", "__import__", 2, false}}, "", false},
		{"sys.modules", strict, canary + "import sys\nsys.modules['os'].system('true')\n",
			ExitPolicyViolation, StaticViolations, []want{{"import", "sys", 2, false}}, "", false},
		{"subclass walk", strict, canary + "().__class__.__bases__[0].__subclasses__()\n",
			ExitPolicyViolation, StaticViolations, []want{
				{"attribute", "__class__", 2, false}, {"attribute", "__bases__", 2, false},
				{"attribute", "__subclasses__", 2, false}}, "", false},
		{"random._os", strict, canary + "import random\nrandom._os.system('true')\n",
			ExitPolicyViolation, StaticViolations, []want{{"attribute", "_os", 3, false}}, "", false},
		{"from random import _os", strict, canary + "from random import _os\n",
			ExitPolicyViolation, StaticViolations, []want{{"attribute", "_os", 2, false}}, "", false},
		{"match class pattern", strict, canary + "match ():\n    case tuple(__class__=c):\n        pass\n",
			ExitPolicyViolation, StaticViolations, []want{{"attribute", "__class__", 3, false}}, "", false},
		{"dunder string key", strict, canary + "A = type('A', (), {'__module__': 'json'})\n",
			ExitPolicyViolation, StaticViolations, []want{{"attribute", "__module__", 2, false}}, "", false},
		{"vars and globals", strict, canary + "vars()['x'] = 1\nglobals()\n",
			ExitPolicyViolation, StaticViolations,
			[]want{{"builtin", "vars", 2, false}, {"builtin", "globals", 3, false}}, "", false},

		// Run time: the program starts, the attempt raises, the canary after it stays unwritten.
		{"importlib computed name", withImportlib,
			"import importlib\nm = importlib.import_module(''.join(['o', 's']))\n" + canary,
			1, StaticOK, []want{{"import", "os", 2, true}}, "ImportError: import of 'os' is not allowed", false},
		{"importlib.__import__ computed", Config{Mode: ModeRun, Allow: plus(StrictAllow, "importlib")},
			"import importlib\nm = importlib.__import__(''.join(['sock', 'et']))\n" + canary,
			1, StaticOK, []want{{"import", "socket", 2, true}}, "ImportError", false},
		{"exec import, builtins allowed", noBuiltinDenial, "exec('import os')\n" + canary,
			1, StaticOK, []want{{"import", "os", 1, true}}, "ImportError: import of 'os' is not allowed", false},
		{"__import__ computed, builtins allowed", noBuiltinDenial, "__import__('o' + chr(115))\n" + canary,
			1, StaticOK, []want{{"import", "os", 1, true}}, "ImportError", false},
		{"exec with foreign builtins", noBuiltinDenial,
			"exec('import socket', {'__builtins__': {'__import__': __import__}})\n" + canary,
			1, StaticOK, []want{{"import", "socket", 1, true}}, "ImportError", false},
		{"json.codecs.sys", strict, "import json\nx = json.codecs.sys\n" + canary,
			1, StaticOK, []want{{"import", "codecs", 2, true}}, "AttributeError: module 'codecs' (json.codecs)", false},
		{"from json import codecs", strict, "from json import codecs\n" + canary,
			1, StaticOK, []want{{"import", "codecs", 1, true}}, "ImportError: cannot import name 'codecs'", false},
		{"codecs.sys", withCodecs, "import codecs\ndef f():\n    return codecs.sys\nf().modules\n" + canary,
			1, StaticOK, []want{{"import", "sys", 3, true}}, "AttributeError", false},
		{"module is read-only", strict, "import json\njson.loads = print\n" + canary,
			1, StaticOK, []want{{"attribute", "json.loads", 2, true}}, "read-only", false},
		{"generator frame", strict, "def g():\n    yield 1\nx = g()\nf = x.gi_frame\n" + canary,
			1, StaticOK, []want{{"attribute", "gi_frame", 4, true}}, "AttributeError", false},
		{"attrgetter computed", strict, "import operator, random\noperator.attrgetter('_' + 'os')(random)\n" + canary,
			1, StaticOK, []want{{"attribute", "_os", 2, true}}, "AttributeError", false},
		{"Formatter field", strict,
			"import string, random\nstring.Formatter().get_field('0._os', [random], {})\n" + canary,
			1, StaticOK, []want{{"attribute", "_os", 2, true}}, "AttributeError", false},
		{"typing string annotation", strict,
			"import typing\nclass A:\n    x: '().__class__.__base__.__subclasses__()'\ntyping.get_type_hints(A)\n" + canary,
			1, StaticOK, []want{{"attribute", "__subclasses__", 4, true}, {"attribute", "__base__", 4, true}},
			"PermissionError: code compiled at run time", false},
		{"module file written by the program", defaultLike,
			"import importlib.util, pathlib\np = pathlib.Path('evil.py')\np.write_text('import socket\\n')\n" +
				"spec = importlib.util.spec_from_file_location('evil', p)\n" +
				"spec.loader.exec_module(importlib.util.module_from_spec(spec))\n" + canary,
			1, StaticOK, []want{{"import", "evil", 5, true}}, "ImportError: import of 'evil'", false},
		{"denied event", defaultLike, "import os\nos.system('true')\n" + canary,
			1, StaticOK, []want{{"event", "os.system", 2, true}},
			"PermissionError: os.system is not allowed", false},

		// Allowed on purpose: the attempt runs, and reaches nothing.
		// The shape of C code's PyImport_Import (datetime.strptime loading
		// _strptime) with the caller's own globals: loaded, but not handed over.
		{"PyImport_Import shape gets None", noBuiltinDenial,
			"g = globals()\nm = __import__('sock' + chr(101) + 't', g, g, [], 0)\nassert m is None\n" + canary,
			0, StaticOK, nil, "", true},
		{"PyImport_Import shape, other dict", noBuiltinDenial,
			"d = {}\nm = __import__('sock' + chr(101) + 't', d, d, [], 0)\n" + canary,
			1, StaticOK, []want{{"import", "socket", 2, true}}, "ImportError", false},
	}
}

func hasViolation(rep Report, w want) bool {
	return slices.ContainsFunc(rep.Violations, func(v Violation) bool {
		return v.Kind == w.kind && v.Name == w.name && v.Runtime == w.runtime &&
			(w.line == 0 || v.Line == w.line) && v.Detail != ""
	})
}

// TestBypassSession runs every bypass attempt as a cell of a session
// (after a first cell, so the guard has been armed for a while), then
// once more split across two cells where it has a runtime part: what
// comes before the refused line in one cell, the rest in the next, so
// that state from an earlier cell is used in a later one. Each time the
// session must go on.
func TestBypassSession(t *testing.T) {
	requirePython(t)
	for _, tc := range bypassCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "canary")
			prog := strings.ReplaceAll(tc.prog, "{CANARY}", strconv.Quote(path))
			s := startSession(t, tc.cfg, dir)
			wantStatus(t, s.run("pass"), CellOK)
			checkBypassCell(t, tc, s.run(prog), path, 0)
			wantStatus(t, s.run("print('next')"), CellOK)

			first, cut := 0, 0
			for _, w := range tc.want {
				if first == 0 || w.line != 0 && w.line < first {
					first = w.line
				}
			}
			lines := strings.SplitAfter(prog, "\n")
			// The last top-level statement that starts before the refused line.
			for k := first - 1; tc.static == StaticOK && k > 0; k-- {
				if lines[k] != "" && lines[k][0] != ' ' {
					cut = k
					break
				}
			}
			if cut == 0 {
				return
			}
			t.Logf("split before line %d", cut+1)
			os.Remove(path)
			s = startSession(t, tc.cfg, dir)
			c := s.run(strings.Join(lines[:cut], ""))
			if c.Status != CellOK || len(c.violations) != 0 {
				t.Fatalf("first half:\n%s\n%s", strings.Join(lines[:cut], ""), c)
			}
			checkBypassCell(t, tc, s.run(strings.Join(lines[cut:], "")), path, cut)
			wantStatus(t, s.run("print('next')"), CellOK)
		})
	}
}

// checkBypassCell checks a cell against tc as TestBypassAttempts checks a
// run, the exit code read as the cell's status; the wanted lines are
// shift lines later in the cell than in tc.prog.
func checkBypassCell(t *testing.T, tc bypassCase, c cellRun, canary string, shift int) {
	t.Helper()
	status := map[int]string{0: CellOK, 1: CellError, ExitPolicyViolation: CellPolicyViolation}[tc.exit]
	if c.Status != status || c.static == nil || c.static.Status != tc.static {
		t.Fatalf("status %q, want %q (static %q)\n%s", c.Status, status, tc.static, c)
	}
	rep := Report{Violations: c.violations}
	for _, w := range tc.want {
		if w.line != 0 {
			w.line -= shift
		}
		if !hasViolation(rep, w) {
			t.Errorf("no violation %+v\n%s", w, c)
		}
	}
	if tc.static == StaticViolations && (c.static.Count != len(c.violations) || c.static.Count != len(tc.want)) {
		t.Errorf("count %d, %d static lines, want %d\n%s", c.static.Count, len(c.violations), len(tc.want), c)
	}
	if !strings.Contains(c.stderr, tc.stderr) {
		t.Errorf("stderr lacks %q\n%s", tc.stderr, c)
	}
	if _, err := os.Stat(canary); (err == nil) != tc.ran {
		t.Errorf("canary exists: %v, want %v\n%s", err == nil, tc.ran, c)
	}
	assertNoRunnerFrames(t, c.stderr)
}
