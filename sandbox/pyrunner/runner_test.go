package pyrunner

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStaticReportsAllAtOnce checks that one run reports every violation,
// sorted, with lines and character columns (the third line has a two-byte
// character before the import).
func TestStaticReportsAllAtOnce(t *testing.T) {
	prog := "import math, os\n" +
		"from subprocess import run\n" +
		"s = \"é\"; import socket\n" +
		"def f():\n" +
		"    return eval('1') + random._inst\n" +
		"x = __import__('ctypes')\n"
	r := runProgram(t, strictConfig(), prog, "")
	type pos struct {
		kind, name string
		line, col  int
	}
	var got []pos
	for _, v := range r.report.Violations {
		got = append(got, pos{v.Kind, v.Name, v.Line, v.Col})
	}
	want := []pos{
		{"import", "os", 1, 13},
		{"import", "subprocess", 2, 0},
		{"import", "socket", 3, 16},
		{"builtin", "eval", 5, 11},
		{"attribute", "_inst", 5, 30},
		{"builtin", "__import__", 6, 4},
		{"import", "ctypes", 6, 4},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("violations\n got %v\nwant %v\n%s", got, want, r)
	}
	if r.exit != ExitPolicyViolation || r.report.Static != StaticViolations || r.report.Count != len(want) {
		t.Errorf("exit %d static %q count %d\n%s", r.exit, r.report.Static, r.report.Count, r)
	}
	if !strings.Contains(r.stderr, "7 violations") || !strings.Contains(r.stderr, "line 3, col 16") ||
		!strings.Contains(r.stderr, "nothing was run") {
		t.Errorf("summary:\n%s", r.stderr)
	}
}

// TestSyntaxErrors checks parse errors, compile-time errors and NUL bytes.
func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		name, prog string
		line       int
		msg        string
	}{
		{"unclosed", "x = 1\ny = (\n", 2, "SyntaxError: '(' was never closed"},
		{"bad token", "x = 1\n\nif x\n    pass\n", 3, "SyntaxError: expected ':'"},
		{"compile stage", "x = 1\nreturn x\n", 2, "SyntaxError: 'return' outside function"},
		{"null byte", "x = 1\ny = 2\x00\n", 2, "SyntaxError: source code cannot contain null bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runProgram(t, strictConfig(), tc.prog, "")
			if r.exit != ExitSyntaxError || r.report.Static != StaticSyntaxError ||
				r.report.SyntaxLine != tc.line || len(r.report.Violations) != 0 {
				t.Fatalf("want syntax error on line %d\n%s", tc.line, r)
			}
			if !strings.Contains(r.stderr, `File "<program>", line `+strconv.Itoa(tc.line)) ||
				!strings.Contains(r.stderr, tc.msg) || !strings.Contains(r.report.SyntaxDetail, "SyntaxError") {
				t.Errorf("stderr or detail lacks %q\n%s", tc.msg, r)
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
}

// TestTracebacks checks that user tracebacks show the program's lines and
// none of the runner's frames, for an exception of the program's own, one
// raised by the runner's import guard, and a chained one.
func TestTracebacks(t *testing.T) {
	for _, tc := range []struct {
		name, prog string
		want       []string
	}{
		{"own exception", "def f(n):\n    return 10 // n\n\nprint(f(0))\n", []string{
			"Traceback (most recent call last):",
			"  File \"<program>\", line 4, in <module>\n    print(f(0))",
			"  File \"<program>\", line 2, in f\n    return 10 // n",
			"ZeroDivisionError: integer division or modulo by zero",
		}},
		{"module view", "import json\ndef load():\n    return json.codecs\nload()\n", []string{
			"  File \"<program>\", line 3, in load\n    return json.codecs",
			"AttributeError: module 'codecs' (json.codecs) is not allowed by the policy nsbox runs under",
		}},
		{"import guard", "def load():\n    return __import__('sock' + chr(101) + 't')\nload()\n", []string{
			"  File \"<program>\", line 2, in load\n    return __import__('sock' + chr(101) + 't')",
			"ImportError: import of 'socket' is not allowed by the policy nsbox runs under",
		}},
		{"chained", "try:\n    __import__('sock' + chr(101) + 't')\nexcept ImportError as e:\n    raise RuntimeError('no network') from e\n", []string{
			"  File \"<program>\", line 2, in <module>",
			"The above exception was the direct cause of the following exception:",
			"  File \"<program>\", line 4, in <module>",
			"RuntimeError: no network",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Mode: ModeRun, Allow: StrictAllow, StrictAttrs: tc.name == "module view"}
			r := runProgram(t, cfg, tc.prog, "")
			if r.exit != 1 || r.report.Static != StaticOK {
				t.Fatalf("want exit 1 after a clean check\n%s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q\n%s", w, r.stderr)
				}
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
}

// TestInternalImports checks that allowed modules import what they need
// although the allowlist refuses it to the program: json (codecs, re),
// statistics (fractions, decimal, random, ...), datetime.strptime
// (_strptime, imported by C code on the program's behalf), copy (copyreg).
func TestInternalImports(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		prog  string
		out   string
	}{
		{[]string{"json"}, "import json\nprint(json.dumps({'a': [1]}))\n", "{\"a\": [1]}\n"},
		{[]string{"statistics"}, "import statistics\nprint(statistics.median([3, 1, 2]))\n", "2\n"},
		{[]string{"datetime"}, "import datetime\nprint(datetime.datetime.strptime('2024-05', '%Y-%m').month)\n", "5\n"},
		{[]string{"copy"}, "import copy\nclass A: pass\nprint(type(copy.copy(A())).__name__)\n", "A\n"},
	} {
		t.Run(tc.allow[0], func(t *testing.T) {
			t.Parallel()
			cfg := with(strictConfig(), func(c *Config) { c.Allow = tc.allow; c.StrictAttrs = false })
			r := runProgram(t, cfg, tc.prog, "")
			if r.exit != 0 || r.stdout != tc.out || len(r.report.Violations) != 0 {
				t.Errorf("want %q and no violations\n%s", tc.out, r)
			}
		})
	}
	// Loaded internally is not allowed: statistics imports fractions, the
	// program may not.
	r := runProgram(t, Config{Mode: ModeRun, Allow: []string{"statistics"}},
		"import statistics\nm = __import__('frac' + chr(116) + 'ions')\n", "")
	if r.exit != 1 || !hasViolation(r.report, want{"import", "fractions", 2, true}) {
		t.Errorf("fractions after statistics:\n%s", r)
	}
}

// TestStrictStdlibWorks runs ordinary code under the strict layer: the
// module views, the guarded gadgets and the run-time compile checks must
// not get in the way of dataclasses, typing, enum, namedtuple, star
// imports and the like.
func TestStrictStdlibWorks(t *testing.T) {
	prog := `import dataclasses, typing, enum, collections, functools, operator, string
import json, re, decimal, fractions, copy, datetime, statistics, collections.abc
from json import *

@dataclasses.dataclass(frozen=True, order=True)
class P:
    x: int
    y: "list[int]" = dataclasses.field(default_factory=list)

class Color(enum.Enum):
    RED = 1

T = collections.namedtuple("T", "a b")
hints = typing.get_type_hints(P)
print(P(1) < P(2), copy.deepcopy(P(1, [2])), sorted(hints))
print(Color.RED.name, T(1, 2).b, functools.reduce(operator.add, [1, 2, 3]))
print(operator.attrgetter("real")(3), string.Formatter().format("{0.real}", 4))
print(dumps(json.loads('{"k": [1]}')), re.sub("a+", "-", "caab"), decimal.Decimal("1.10") * 2)
print(fractions.Fraction(1, 3) + 1, statistics.mean([1, 2]), isinstance(json, type(re)))
print(datetime.date(2024, 1, 2).isoformat(), issubclass(dict, collections.abc.Mapping))
print("dumps" in dir(json), "codecs" in dir(json))
`
	r := runProgram(t, strictConfig(), prog, "")
	out := "True P(x=1, y=[2]) ['x', 'y']\nRED 2 6\n3 4\n{\"k\": [1]} c-b 2.20\n4/3 1.5 True\n" +
		"2024-01-02 True\nTrue False\n"
	if r.exit != 0 || r.stdout != out || len(r.report.Violations) != 0 {
		t.Errorf("want\n%s\n%s", out, r)
	}
}

// TestExits checks SystemExit, exit(), and KeyboardInterrupt.
func TestExits(t *testing.T) {
	for _, tc := range []struct {
		name, prog string
		exit, sig  int
		stderr     string
	}{
		{"SystemExit code", "print('bye')\nraise SystemExit(7)\n", 7, 0, ""},
		{"exit()", "exit(3)\n", 3, 0, ""},
		{"SystemExit message", "raise SystemExit('fatal: no input')\n", 1, 0, "fatal: no input"},
		{"SystemExit in function", "def f():\n    raise SystemExit(0)\nf()\nprint('not reached')\n", 0, 0, ""},
		{"KeyboardInterrupt", "def f():\n    raise KeyboardInterrupt\nf()\n", -1, int(syscall.SIGINT), "KeyboardInterrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runProgram(t, strictConfig(), tc.prog, "")
			if r.exit != tc.exit || r.signal != tc.sig || !strings.Contains(r.stderr, tc.stderr) ||
				strings.Contains(r.stdout, "not reached") {
				t.Errorf("want exit %d signal %d\n%s", tc.exit, tc.sig, r)
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
}

// TestCheckMode checks that mode "check" never runs the program.
func TestCheckMode(t *testing.T) {
	for _, tc := range []struct {
		name, prog string
		exit       int
		static     string
	}{
		{"clean", "print('hello')\n", 0, StaticOK},
		{"violations", "import os\n", ExitPolicyViolation, StaticViolations},
		{"syntax error", "def f(:\n", ExitSyntaxError, StaticSyntaxError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			canary := filepath.Join(dir, "canary")
			prog := "open(" + strconv.Quote(canary) + ", 'w').write('ran')\n" + tc.prog
			r := runProgram(t, with(strictConfig(), func(c *Config) { c.Mode = ModeCheck }), prog, dir)
			if r.exit != tc.exit || r.report.Static != tc.static || r.stdout != "" {
				t.Errorf("want exit %d, %q\n%s", tc.exit, tc.static, r)
			}
			if _, err := os.Stat(canary); err == nil {
				t.Errorf("check mode ran the program\n%s", r)
			}
		})
	}
}

// TestDeniedEvents checks audit events: refused with PermissionError, the
// program may catch it, and every attempt is reported.
func TestDeniedEvents(t *testing.T) {
	cfg := Config{Mode: ModeRun, Allow: []string{"subprocess", "os"},
		DenyEvents: []string{"subprocess.Popen", "os.system", "os.posix_spawn", "os.fork"}}
	prog := `import os, subprocess
for attempt in (lambda: subprocess.run(["true"]), lambda: os.system("true"),
                lambda: os.posix_spawn("/bin/true", ["true"], {}), os.fork):
    try:
        attempt()
        print("ran")
    except PermissionError as e:
        print(e)
subprocess.run(["true"])
`
	r := runProgram(t, cfg, prog, "")
	out := "subprocess.Popen is not allowed by the policy nsbox runs under\n" +
		"os.system is not allowed by the policy nsbox runs under\n" +
		"os.posix_spawn is not allowed by the policy nsbox runs under\n" +
		"os.fork is not allowed by the policy nsbox runs under\n"
	if r.exit != 1 || r.stdout != out ||
		!strings.Contains(r.stderr, "PermissionError: subprocess.Popen is not allowed") {
		t.Fatalf("want\n%s\n%s", out, r)
	}
	// Each is reported on the program's line nearest to the call: the lambdas.
	for _, w := range []want{{"event", "subprocess.Popen", 2, true}, {"event", "os.system", 2, true},
		{"event", "os.posix_spawn", 3, true}, {"event", "os.fork", 5, true},
		{"event", "subprocess.Popen", 9, true}} {
		if !hasViolation(r.report, w) {
			t.Errorf("no %+v\n%s", w, r)
		}
	}
}

// TestOpenForWriting checks the "open" denial: writes only inside the
// writable dirs, whatever the route (open, os.open, shutil, a symlink);
// reading anywhere.
func TestOpenForWriting(t *testing.T) {
	dir := t.TempDir()
	allowed, outside := filepath.Join(dir, "allowed"), filepath.Join(dir, "outside")
	for _, d := range []string{allowed, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "data"), []byte("42"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "via-link"), filepath.Join(allowed, "link")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Mode: ModeRun, DenyBuiltins: []string{"open"}, WritableDirs: []string{allowed}}
	prog := `import os, shutil
A, O = ` + strconv.Quote(allowed) + `, ` + strconv.Quote(outside) + `
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except PermissionError as e:
        print(name, "denied", e.errno)
attempt("write allowed", lambda: open(A + "/out.txt", "w").write("x"))
attempt("read outside", lambda: open(O + "/data").read())
attempt("write outside", lambda: open(O + "/x", "w"))
attempt("append outside", lambda: open(O + "/data", "a"))
attempt("os.open outside", lambda: os.open(O + "/y", os.O_WRONLY | os.O_CREAT))
attempt("symlink out", lambda: open(A + "/link", "w"))
attempt("shutil.copy out", lambda: shutil.copy(A + "/out.txt", O + "/copy"))
attempt("relative", lambda: open("rel.txt", "w"))
attempt("dev null", lambda: open("/dev/null", "w").write("x"))
`
	r := runProgram(t, cfg, prog, outside)
	out := "write allowed ok\nread outside ok\nwrite outside denied 13\nappend outside denied 13\n" +
		"os.open outside denied 13\nsymlink out denied 13\nshutil.copy out denied 13\n" +
		"relative denied 13\ndev null ok\n"
	if r.exit != 0 || r.stdout != out {
		t.Fatalf("want\n%s\n%s", out, r)
	}
	for _, name := range []string{"x", "y", "via-link", "copy", "rel.txt"} {
		if _, err := os.Lstat(filepath.Join(outside, name)); err == nil {
			t.Errorf("%s was written outside the writable dir", name)
		}
	}
	if got := len(r.report.RuntimeViolations()); got != 6 {
		t.Errorf("%d runtime violations, want 6 (one per refused write)\n%s", got, r)
	}
	for _, v := range r.report.Violations {
		if v.Kind != KindBuiltin || v.Name != "open" || v.Line == 0 {
			t.Errorf("violation %+v", v)
		}
	}
}

// TestReportPipeIsPrivate checks that the report fd is close-on-exec and
// that the program cannot open it again, by number or through /proc.
func TestReportPipeIsPrivate(t *testing.T) {
	prog := `import os
print(os.get_inheritable(3))
for target in (3, "/proc/self/fd/3", "/dev/fd/3", os.dup(3), "/usr/../proc/self/fd/3",
               "//proc/self/fd/3", "/./dev/fd/3", "../../../../../../proc/self/fd/3"):
    try:
        open(target, "w").write('{"static":"ok"}\n')
        print("opened")
    except PermissionError:
        print("denied")
`
	r := runProgram(t, Config{Mode: ModeRun}, prog, "")
	if r.exit != 0 || r.stdout != "False\n"+strings.Repeat("denied\n", 8) {
		t.Fatalf("report fd reachable\n%s", r)
	}
	if r.report.Static != StaticOK || !hasViolation(r.report, want{"event", "open", 6, true}) {
		t.Errorf("report\n%s", r)
	}
}

// TestNoAllowlist checks that a nil Allow turns import checks off.
func TestNoAllowlist(t *testing.T) {
	r := runProgram(t, Config{Mode: ModeRun}, "import os, socket, ctypes\nprint(__import__('sub' + 'process').__name__)\n", "")
	if r.exit != 0 || r.stdout != "subprocess\n" || len(r.report.Violations) != 0 {
		t.Errorf("%s", r)
	}
}

// TestProgramEnvironment checks what the program sees of its surroundings.
func TestProgramEnvironment(t *testing.T) {
	prog := `import sys
print(sys.argv, __name__, repr(sys.stdin.read()))
try:
    input()
except EOFError:
    print("EOF")
import __main__
print(__main__.__dict__ is globals(), "report_fd" in str(sys.argv), "" in sys.path)
`
	r := runProgram(t, Config{Mode: ModeRun, Filename: "job.py"}, prog, "")
	if r.exit != 0 || r.stdout != "['job.py'] __main__ ''\nEOF\nTrue False False\n" {
		t.Errorf("%s", r)
	}
}

// TestProgramInput checks the program's standard input: the bytes after
// the program's frame, every one of them, through sys.stdin (never read
// by the runner, so none sits in its buffer), input() and fd 0; and a
// program that leaves its input unread ends as usual.
func TestProgramInput(t *testing.T) {
	data := make([]byte, 0, 300<<10)
	for i := range 300 << 10 {
		data = append(data, byte(i*7))
	}
	prog := `import hashlib, os, sys
data = sys.stdin.buffer.read()
print(len(data), hashlib.sha256(data).hexdigest(), repr(os.read(0, 1)))
`
	r := runProgramInput(t, Config{Mode: ModeRun}, prog, "", nil, string(data))
	want := fmt.Sprintf("%d %x b''\n", len(data), sha256.Sum256(data))
	if r.exit != 0 || r.stdout != want {
		t.Errorf("want stdout %q\n%s", want, r)
	}
	prog = "a, b = input(), input()\nimport sys\nprint(a, b, repr(sys.stdin.read()))\n"
	r = runProgramInput(t, Config{Mode: ModeRun}, prog, "", nil, "line one\nline two\nrest")
	if want := "line one line two 'rest'\n"; r.exit != 0 || r.stdout != want {
		t.Errorf("want stdout %q\n%s", want, r)
	}
	// Unread: the runner read only the frame; the feeding side gets EPIPE,
	// not the program an error.
	r = runProgramInput(t, Config{Mode: ModeRun}, "print('ignored')\n", "", nil, string(data))
	if r.exit != 0 || r.stdout != "ignored\n" {
		t.Errorf("%s", r)
	}
}

// TestProgramFrameErrors checks that a malformed program frame is the
// caller's bug: ExitRunnerError and a message naming the problem.
func TestProgramFrameErrors(t *testing.T) {
	requirePython(t)
	cfg, err := encodeConfig(python, Config{Mode: ModeRun, ReportFD: 3, WritableDirs: sandboxWritable})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ stdin, want string }{
		{"", "program frame: no program (end of input)"},
		{"print(1)\n", "program frame: bad header"},
		{"PROGRAM 12", "program frame: end of input in the header"},
		{"PROGRAM 12\nprint(1)", "program frame: end of input in the program"},
		{"PROGRAM x\n", "program frame: bad header"},
		{"PROGRAM 99999999999\n", "program frame: 99999999999 bytes, more than"},
		{strings.Repeat("P", 100), "program frame: header too long"},
	} {
		out, err := execRunnerStdin(t, cfg, tc.stdin)
		if code := exitCode(err); code != ExitRunnerError || !strings.Contains(out, "nsbox runner: "+tc.want) {
			t.Errorf("stdin %.40q: exit %d, output %q; want %d and %q", tc.stdin, code, out, ExitRunnerError, tc.want)
		}
	}
}

// TestRunnerConfigErrors checks that the runner refuses a config the Go
// side would not produce: exit ExitRunnerError, a message naming the
// problem, no status line. Each case breaks one thing in a config the
// runner accepts.
func TestRunnerConfigErrors(t *testing.T) {
	requirePython(t)
	good, err := encodeConfig(python, Config{Mode: ModeCheck, ReportFD: 3, WritableDirs: sandboxWritable})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := execRunner(t, good); err != nil {
		t.Fatalf("the unbroken config: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		key   string
		value any // nil: the key is left out
		want  string
	}{
		{"surprise", 1, "unknown config keys: surprise"},
		{"writable_dirs", nil, "missing config keys: writable_dirs"},
		{"max_violation_lines", nil, "missing config keys: max_violation_lines"},
		{"exit_syntax_error", nil, "missing config keys: exit_syntax_error"},
		{"writable_dirs", []string{"tmp"}, "writable_dirs"},
		{"writable_dirs", json.RawMessage("null"), "writable_dirs"},
		{"mode", "walk", "mode"},
		{"deny_builtins", []string{"eval", "nosuchbuiltin"}, "deny_builtins: not builtins: nosuchbuiltin"},
		{"report_fd", 9, "report_fd 9"},
		{"report_fd", true, "report_fd"},
		{"filename", "", "filename"},
		{"max_violation_lines", 0, "max_violation_lines"},
		{"exit_policy_violation", 256, "exit_policy_violation"},
		{"strict_attrs", "yes", "strict_attrs"},
		{"outputs", nil, "missing config keys: outputs"},
		{"outputs", 1, "outputs: want a boolean"},
		{"preload", json.RawMessage("null"), "preload: want a list"},
		{"preload", []string{"os path"}, "preload: 'os path' is not a module name"},
		{"preload", []string{"json"}, "preload: nothing runs in mode check"},
		{"max_output_bytes", 0, "max_output_bytes"},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(good), &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m[tc.key]; tc.value == nil {
			if !ok {
				t.Fatalf("the config has no key %s", tc.key)
			}
			delete(m, tc.key)
		} else {
			m[tc.key] = tc.value
		}
		cfg, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out, err := execRunner(t, string(cfg))
		if code := exitCode(err); code != ExitRunnerError || !strings.Contains(out, "nsbox runner: "+tc.want) {
			t.Errorf("config %s: exit %d, output %q; want %d and %q", cfg, code, out, ExitRunnerError, tc.want)
		}
	}
	out, err := execRunner(t, "not json")
	if code := exitCode(err); code != ExitRunnerError || !strings.Contains(out, "nsbox runner: config is not JSON") {
		t.Errorf("not json: exit %d, output %q", code, out)
	}
}

// TestProgramWrittenCode checks that code the program writes to a writable
// directory counts as the program's: its imports are checked even though
// it runs with the real builtins, as a module of its own.
func TestProgramWrittenCode(t *testing.T) {
	cfg := Config{Mode: ModeRun, Allow: plus(DefaultAllow, "helper")}
	prog := `import pathlib, sys
pathlib.Path("helper.py").write_text("import json\nimport socket\n")
sys.path.insert(0, ".")
import helper
`
	r := runProgram(t, cfg, prog, "")
	if r.exit != 1 || !hasViolation(r.report, want{"import", "socket", 4, true}) ||
		!strings.Contains(r.stderr, "File \"/") || !strings.Contains(r.stderr, "helper.py\", line 2") {
		t.Errorf("%s", r)
	}
}

// TestThreadImports checks that the guard works in the program's threads.
func TestThreadImports(t *testing.T) {
	prog := `import threading
out = []
def work():
    try:
        __import__("sock" + chr(101) + "t")
    except ImportError as e:
        out.append(str(e))
th = threading.Thread(target=work)
th.start()
th.join()
print(out)
`
	r := runProgram(t, Config{Mode: ModeRun, Allow: DefaultAllow}, prog, "")
	if r.exit != 0 || !strings.Contains(r.stdout, "import of 'socket' is not allowed") ||
		!hasViolation(r.report, want{"import", "socket", 5, true}) {
		t.Errorf("%s", r)
	}
}
