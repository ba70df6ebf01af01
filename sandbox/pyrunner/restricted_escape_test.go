package pyrunner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// escapeTail takes a list of every class (subs) to the import machinery
// and writes the canary through posix: what each route below would do
// if it got out. {CANARY} is the canary's path, quoted.
const escapeTail = `
def escape(subs):
    imp = [c for c in subs if c.__name__ == "BuiltinImporter"][0]
    px = imp.load_module("posix")
    px.close(px.open({CANARY}, 65))
`

// restrictedEscape is one route around strict's Python layer: a program
// that, run by plain python3.11, writes the canary (TestRestrictedEscapes
// checks that first: each case is a real escape), and under restricted
// mode must stop with a violation (static, or at run time) and no canary.
type restrictedEscape struct {
	name string
	prog string
	// loose: run with only the allowlist and strict attributes (getattr,
	// vars and the rest not denied), so that the run-time guards, not
	// the static deny list, meet the route; else the strict policy's.
	loose bool
	// quiet: the route ends in an ordinary exception, no violation: what
	// it looks for is not there (vars() and dir() show no dunder).
	quiet bool
}

func restrictedEscapes() []restrictedEscape {
	return []restrictedEscape{
		// The routes that opened the guarded strict mode.
		{"type of operator.attrgetter", `import operator
AG = type(operator.attrgetter("real"))
escape(AG("__class__.__base__.__subclasses__")(())())
`, false, false},
		{"match with computed __match_args__ and a metaclass __instancecheck__", `class Meta(type):
    def __instancecheck__(cls, obj):
        return True
class Probe(metaclass=Meta):
    __match_args__ = ("__cl" + "ass__",)
match ():
    case Probe(c):
        escape(c.__base__.__subclasses__())
`, false, false},
		{"functools.update_wrapper with the program's __setattr__", `import functools
got = []
class Sink:
    def __setattr__(self, name, value):
        got.append(value)
functools.update_wrapper(Sink(), object, assigned=("__subcl" + "asses__",), updated=())
escape(got[0]())
`, false, false},
		{"functools.update_wrapper into a plain object", `import functools
class Sink:
    pass
s = Sink()
name = "__subcl" + "asses__"
functools.update_wrapper(s, object, assigned=(name,), updated=())
escape(vars(s)[name]())
`, true, false},
		{"functools.wraps with a computed name", `import functools
name = "__subcl" + "asses__"
def f():
    pass
w = functools.wraps(object, assigned=(name,), updated=())(f)
escape(vars(w)[name]())
`, true, false},
		// The classic RestrictedPython escapes.
		{"format string attribute", `class Box:
    pass
b = Box()
s = "{0.__class__.__base__.__subclasses__.__self__.__name__}".format(())
escape(object.__subclasses__())
`, false, false},
		{"format string, loose", `fmt = "{0.__class__.__base__}"
print(fmt.format(()))
escape(().__class__.__base__.__subclasses__())
`, true, false},
		{"str.format unbound", `f = str.format
print(f("{0.__class__.__mro__}", ()))
escape(().__class__.__base__.__subclasses__())
`, true, false},
		{"str.format_map", `print("{x.__class__.__mro__}".format_map({"x": ()}))
escape(().__class__.__base__.__subclasses__())
`, true, false},
		{"string.Formatter get_field", `import string
g = (x for x in [1])
print(string.Formatter().format("{0.gi_frame}", g))
escape(().__class__.__base__.__subclasses__())
`, true, false},
		{"getattr with a computed name", `o = getattr(getattr((), "__cl" + "ass__"), "__ba" + "se__")
escape(getattr(o, "__subcl" + "asses__")())
`, true, false},
		{"getattr, strict", `o = getattr(getattr((), "__cl" + "ass__"), "__ba" + "se__")
escape(getattr(o, "__subcl" + "asses__")())
`, false, false},
		{"subclass walk", `escape(().__class__.__base__.__subclasses__())
`, false, false},
		{"mro walk", `escape(type(()).mro()[-1].__subclasses__())
`, true, false},
		{"mro walk by getattr", `m = getattr(type(()), "mr" + "o")
escape(getattr(m()[-1], "__subcl" + "asses__")())
`, true, false},
		{"generator gi_frame", `def gen():
    yield 1
g = gen()
fr = g.gi_frame
escape(fr.f_builtins["object"].__subclasses__())
`, false, false},
		{"generator gi_frame by getattr", `def gen():
    yield 1
g = gen()
fr = getattr(g, "gi_" + "frame")
escape(getattr(fr, "f_buil" + "tins")["object"].__subclasses__())
`, true, false},
		{"exception traceback frame", `try:
    1 / 0
except Exception as e:
    fr = e.__traceback__.tb_frame
    escape(fr.f_builtins["object"].__subclasses__())
`, false, false},
		{"exception traceback by getattr", `try:
    1 / 0
except Exception as e:
    tb = getattr(e, "__trace" + "back__")
    escape(getattr(tb, "tb_fr" + "ame").f_builtins["object"].__subclasses__())
`, true, false},
		{"vars of a class", `d = vars(type)
escape(d["__subcl" + "asses__"](object))
`, true, true},
		{"vars of the caller", `v = vars()
b = v["__builtins__"]
b = b if isinstance(b, dict) else vars(b)
escape(b["object"].__subclasses__())
`, true, false},
		{"dir walk", `name = [n for n in dir(type) if "subclasses" in n][0]
escape(getattr(object, name)())
`, true, true},
		{"decorator applying getattr", `import functools
@(lambda f: functools.partial(getattr(object, "__subcl" + f.__name__)))
def asses__():
    pass
escape(asses__())
`, true, false},
		{"type with three arguments", `T = type("T", (), {"__getattr__": lambda self, name: object.__subclasses__})
escape(T().anything())
`, true, false},
		{"type of type", `T = type(type(1))
X = T("X", (), {"__getattr__": lambda self, name: object.__subclasses__})
escape(X().anything())
`, true, false},
		{"lambda default argument", `f = lambda g=getattr, n="__subcl" + "asses__": g(object, n)
escape(f()())
`, true, false},
		{"lambda default, strict", `f = lambda o=().__class__.__base__: o.__subclasses__()
escape(f())
`, false, false},
		{"typing.get_origin hands out type", `import typing
T = typing.get_origin(typing.Type[int])
X = T("X", (), {"__getattr__": lambda self, name: object.__subclasses__})
escape(X().anything())
`, true, false},
		{"abc.ABCMeta as a metaclass call", `import abc
M = abc.ABCMeta
X = M("X", (), {"__getattr__": lambda self, name: object.__subclasses__})
escape(X().anything())
`, true, false},
		{"operator.attrgetter with dunders", `import operator
escape(operator.attrgetter("__class__.__base__.__subclasses__")(())())
`, true, false},
		{"operator.methodcaller format", `import operator
print(operator.methodcaller("format", ())("{0.__class__.__base__}"))
escape(().__class__.__base__.__subclasses__())
`, true, false},
		{"super walk", `class A:
    def walk(self):
        return getattr(super(), "__subcl" + "asses__")
escape(object.__subclasses__())
A().walk()
`, true, false},
		{"typing.get_type_hints evaluates a string", `import typing
def f(x: "().__class__.__base__.__subclasses__()"):
    pass
escape(typing.get_type_hints(f)["x"])
`, true, false},
		{"class body __getattr__", `class X:
    def __getattr__(self, name):
        return object.__subclasses__
escape(X().anything())
`, true, false},
		{"module attribute write", `import json
json.loads = lambda s: object.__subclasses__()
escape(json.loads(""))
`, true, false},
		{"setattr on a library class", `import json
setattr(json.JSONDecoder, "decode", lambda self, s: object.__subclasses__())
escape(json.JSONDecoder().decode(""))
`, true, false},
	}
}

// TestRestrictedEscapes: each route, a real escape under plain python,
// stops under strict in restricted mode with a violation and no canary.
func TestRestrictedEscapes(t *testing.T) {
	requirePython(t)
	strict := restrictedConfig(t)
	loose := with(strict, func(c *Config) { c.DenyBuiltins = nil })
	for _, tc := range restrictedEscapes() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prog := escapeTail + tc.prog
			// Plain python: the route is real.
			plain := filepath.Join(t.TempDir(), "canary")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, python, "-I", "-c",
				strings.ReplaceAll(prog, "{CANARY}", strconv.Quote(plain))).CombinedOutput()
			if _, serr := os.Stat(plain); serr != nil {
				t.Fatalf("under plain python the route does not escape (%v): %v\n%s", err, serr, out)
			}
			cfg := strict
			if tc.loose {
				cfg = loose
			}
			dir := t.TempDir()
			canary := filepath.Join(dir, "canary")
			r := runProgram(t, cfg, strings.ReplaceAll(prog, "{CANARY}", strconv.Quote(canary)), dir)
			if _, err := os.Stat(canary); err == nil {
				t.Fatalf("the canary was written: the route escaped\n%s", r)
			}
			if r.exit == 0 || len(r.report.Violations) == 0 && !tc.quiet {
				t.Fatalf("exit %d with %d violations; want a refusal reported\n%s", r.exit, len(r.report.Violations), r)
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
}

// TestBypassAttemptsRestricted runs the bypass suite's cases for strict
// attributes again in restricted mode: what the guarded mode stops stays
// stopped (a violation, no canary), and what it lets run still runs.
func TestBypassAttemptsRestricted(t *testing.T) {
	requirePython(t)
	lib := restrictedLib(t)
	n := 0
	for _, tc := range bypassCases() {
		if !tc.cfg.StrictAttrs {
			continue
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := with(tc.cfg, func(c *Config) { c.PythonMode, c.RestrictedLib = PythonRestricted, lib })
			dir := t.TempDir()
			path := filepath.Join(dir, "canary")
			r := runProgram(t, cfg, strings.ReplaceAll(tc.prog, "{CANARY}", strconv.Quote(path)), dir)
			_, err := os.Stat(path)
			if ran := err == nil; ran != tc.ran {
				t.Fatalf("canary written: %v, want %v\n%s", ran, tc.ran, r)
			}
			if !tc.ran && (r.exit == 0 || len(r.report.Violations) == 0) {
				t.Fatalf("exit %d with %d violations; want a refusal reported\n%s", r.exit, len(r.report.Violations), r)
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
	if n < 20 {
		t.Fatalf("only %d bypass cases for strict attributes", n)
	}
}
