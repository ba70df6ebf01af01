package pyrunner

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// stateAttack is a program that goes after the runner's enforcement state
// as a determined attacker would under the default policy (sys, gc,
// threading allowed; no strict_attrs), then tries what the policy denies.
// It finds the runner through frames, gc.get_objects, gc.get_referents and
// sys.modules, and then: replaces every entry of every runner globals dict,
// sets every attribute of every runner class and object (flags flipped,
// sets filled with its thread id, dicts and sets emptied), sets __code__,
// __defaults__ and __kwdefaults__ of every runner function, the hook's
// __cantrace__, monkeypatches builtins, posix, sys and _thread, and traces
// every frame, rewriting the locals of the runner's. Each payload is
// harmless: forked children (os.fork, and, tried first, libc's fork
// through ctypes loaded as library code) that exit at once, shell
// commands and a fork_exec that would write a canary file. FORKED is written by the
// parent only if a fork succeeded; the builtins are put back before
// subprocess.run, which needs them to get as far as starting a process.
// It prints "attempts done" and how many runner globals dicts, functions
// and classes it found once it has tried everything.
const stateAttack = `
import asyncio, gc, os, sys, threading, types
CANARY = {CANARY}
FORKED = CANARY + ".forked"
me = threading.get_ident()
keep = {"open": open, "print": print, "type": type, "isinstance": isinstance,
        "PermissionError": PermissionError, "BaseException": BaseException,
        "subprocess": sys.modules["subprocess"], "fork_exec": sys.modules["_posixsubprocess"].fork_exec}
tally = {"changed": 0, "refused": 0}

def ctypes_fork():
    # ctypes loaded as library code (the code module), then libc's fork.
    import code
    code.InteractiveInterpreter().runsource("import ctypes")
    if "ctypes" not in sys.modules:
        raise ImportError("no ctypes")
    pid = sys.modules["ctypes"].CDLL(None).fork()
    if pid == 0:
        os._exit(0)
    open(FORKED, "w").write("forked")

try:
    ctypes_fork()
except ImportError:
    print("refused ctypes_fork ImportError")

def attempt(f):
    try:
        f()
        tally["changed"] += 1
    except BaseException:
        tally["refused"] += 1

def noop(*a, **k):
    return None

def spoil(v):
    if type(v) is bool:
        return not v
    if type(v) is int:
        return 10 ** 9
    if isinstance(v, (set, frozenset)):
        return frozenset() if type(v) is frozenset else {me}
    if isinstance(v, dict):
        return {}
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return noop
    if isinstance(v, tuple):
        return ()
    return None

# Everything reachable: frames, their globals and locals, gc, sys.modules.
frames = []
f = sys._getframe()
while f is not None:
    frames.append(f)
    f = f.f_back
objs = list(gc.get_objects())
for fr in frames:
    objs += [fr.f_globals, fr.f_locals, fr.f_builtins]
objs += list(sys.modules.values())
for o in list(objs):
    try:
        objs += list(gc.get_referents(o))
    except BaseException:
        pass
mine = id(globals())
own = sys._getframe().f_builtins  # the attacker's own builtins: spared

def clear(v):
    if v is not own:
        v.clear()
runner_globals = {}
for o in objs:
    if type(o) is dict and id(o) != mine and ("_State" in o or "_core" in o or "_hook" in o):
        runner_globals[id(o)] = o
funcs, classes, insts = {}, {}, {}
for o in objs:
    if type(o) is types.FunctionType and id(o.__globals__) in runner_globals:
        funcs[id(o)] = o
    if type(o) is types.MethodType and o.__func__ is not None:
        attempt(lambda o=o: setattr(o, "__cantrace__", True))
        if type(o.__self__) is types.FunctionType:
            funcs[id(o.__self__)] = o.__self__
for g in runner_globals.values():
    for v in list(g.values()):
        if type(v) is type and v.__module__ in (g.get("__name__"), "builtins") and hasattr(v, "__dict__"):
            classes[id(v)] = v
        elif hasattr(v, "__dict__") and not isinstance(v, (types.ModuleType, types.FunctionType, type)):
            insts[id(v)] = v
for c in classes.values():
    for k, v in list(vars(c).items()):
        if not k.startswith("__"):
            inner = v
            if isinstance(v, (set, dict)):
                attempt(lambda v=v: clear(v))
                if isinstance(v, set):
                    attempt(lambda v=v: v.add(me))
            if hasattr(v, "__dict__") and not isinstance(v, (type, types.FunctionType)):
                insts[id(v)] = v
            if v is not own:
                attempt(lambda c=c, k=k, v=v: setattr(c, k, spoil(v)))
    attempt(lambda c=c: setattr(c, "__cantrace__", True))
for o in list(insts.values()):
    for k, v in list(vars(o).items()):
        if isinstance(v, (set, dict)):
            attempt(lambda v=v: clear(v))
        if v is not own:
            attempt(lambda o=o, k=k, v=v: setattr(o, k, spoil(v)))
for fn in funcs.values():
    attempt(lambda fn=fn: setattr(fn, "__code__", noop.__code__))
    attempt(lambda fn=fn: setattr(fn, "__defaults__", None))
    attempt(lambda fn=fn: setattr(fn, "__kwdefaults__", None))
    attempt(lambda fn=fn: setattr(fn, "__cantrace__", True))
for g in runner_globals.values():
    for k in list(g):
        if k != "__builtins__":
            attempt(lambda g=g, k=k: g.__setitem__(k, spoil(g[k])))
b = sys.modules["builtins"]
saved = dict(vars(b))
for mod, names in ((sys.modules["posix"], ("write", "fstat", "_exit", "stat", "lstat")),
                   (sys, ("_getframe", "audit", "addaudithook")),
                   (sys.modules["_thread"], ("get_ident",)),
                   (b, ("isinstance", "any", "len", "getattr", "frozenset", "id", "memoryview",
                        "PermissionError", "ImportError", "__import__", "str"))):
    for n in names:
        attempt(lambda mod=mod, n=n: setattr(mod, n, noop if n[0].islower() or n[0] == "_" else Exception))

def tracer(frame, event, arg):
    if frame.f_globals is not globals():
        try:
            loc = frame.f_locals
            for k in ("event", "name"):
                if k in loc:
                    loc[k] = "harmless"
        except BaseException:
            pass
    return tracer
sys.settrace(tracer)
threading.settrace(tracer)

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    keep["open"](FORKED, "w").write("forked")

def run():
    keep["subprocess"].run(["/bin/sh", "-c", "echo ran > " + CANARY])

def fork_exec():
    r, w = os.pipe()
    keep["fork_exec"](["/bin/sh", "-c", "echo ran > " + CANARY], [b"/bin/sh"], True, (w,), None,
                      None, -1, -1, -1, -1, -1, -1, r, w, True, False, 0, None, None, None, -1,
                      None, False)

def system():
    os.system("echo ran > " + CANARY)

def spawn():
    os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "echo ran > " + CANARY], {})

def restore_builtins():
    vars(b).update(saved)  # subprocess.run needs isinstance and the rest

for f in (fork, fork_exec, system, spawn, restore_builtins, run):
    try:
        f()
    except keep["BaseException"] as e:
        keep["print"]("refused", f.__name__, keep["type"](e).__name__)
sys.settrace(None)
keep["print"]("attempts done", len(runner_globals), len(funcs), len(classes), tally)
`

// TestRunnerStateOutOfReach runs stateAttack under the default policy's
// Python layer and checks that every denied action failed, that each
// was reported, and that the attack did reach the runner (its globals,
// functions and classes).
func TestRunnerStateOutOfReach(t *testing.T) {
	requirePython(t)
	cfg := Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	r := runProgram(t, cfg, strings.ReplaceAll(stateAttack, "{CANARY}", strconv.Quote(canary)), dir)
	if !regexp.MustCompile(`attempts done [1-9]\d* [1-9]\d+ [1-9]\d* `).MatchString(r.stdout) {
		t.Fatalf("the attack did not finish, or did not reach the runner\n%s", r)
	}
	for _, f := range []string{canary, canary + ".forked"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s exists: a denied action ran\n%s", f, r)
		}
	}
	for _, w := range []string{"fork", "run", "fork_exec", "system", "spawn"} {
		if !strings.Contains(r.stdout, "refused "+w+" PermissionError\n") {
			t.Errorf("%s was not refused with PermissionError\n%s", w, r)
		}
	}
	if !strings.Contains(r.stdout, "refused ctypes_fork ImportError\n") {
		t.Errorf("ctypes was loaded\n%s", r)
	}
	got := map[string]bool{}
	for _, v := range r.report.RuntimeViolations() {
		got[v.Kind+" "+v.Name] = true
	}
	for _, w := range []string{"event os.fork", "event subprocess.Popen", "event os.system",
		"event os.posix_spawn", "event object.__setattr__", "import _ctypes"} {
		if !got[w] {
			t.Errorf("no runtime violation %q\n%s", w, r)
		}
	}
}

// TestReportChannelClosed: a program that closes the report fd and then
// does something denied cannot have the refusal go unreported quietly:
// the runner ends the run with the policy exit code and says why.
func TestReportChannelClosed(t *testing.T) {
	requirePython(t)
	cfg := Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}
	dir := t.TempDir()
	forked := filepath.Join(dir, "forked")
	prog := "import os\nos.close(3)\nr, w = os.pipe()\nos.dup2(r, 3)\ntry:\n    pid = os.fork()\n" +
		"    if pid == 0:\n        os._exit(0)\n    open(" + strconv.Quote(forked) + ", 'w').write('x')\n" +
		"except PermissionError:\n    pass\nprint('went on')\n"
	r := runProgram(t, cfg, prog, dir)
	if r.exit != ExitPolicyViolation || !strings.Contains(r.stderr, "closed or replaced the report channel") ||
		strings.Contains(r.stdout, "went on") {
		t.Errorf("want exit %d and the runner's reason on stderr\n%s", ExitPolicyViolation, r)
	}
	if _, err := os.Stat(forked); err == nil {
		t.Errorf("the fork ran\n%s", r)
	}
}

// TestRawExtensionsRefused: the extension modules that would undo the
// Python layer are refused at load whoever loads them, here code the
// program runs through the code module (which runs it as library code,
// with the real builtins).
func TestRawExtensionsRefused(t *testing.T) {
	requirePython(t)
	cfg := Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}
	for _, name := range []string{"_ctypes", "_xxsubinterpreters", "_testcapi", "_posixsubprocess"} {
		t.Run(name, func(t *testing.T) {
			prog := "import code, sys\nsys.modules.pop('_posixsubprocess', None)\n" +
				"code.InteractiveInterpreter().runsource('import " + name + "')\n" +
				"print(" + strconv.Quote(name) + " in sys.modules)\n"
			r := runProgram(t, cfg, prog, "")
			if strings.TrimSpace(r.stdout) != "False" || !strings.Contains(r.stderr, "ImportError") {
				t.Errorf("%s loaded\n%s", name, r)
			}
			if !hasViolation(r.report, want{"import", name, 3, true}) {
				t.Errorf("no violation for %s\n%s", name, r)
			}
		})
	}
}

// TestCtypesWithPackages: where the allowlist names a package beyond the
// standard library (pandas imports ctypes), _ctypes loads as before.
func TestCtypesWithPackages(t *testing.T) {
	requirePython(t)
	cfg := Config{Mode: ModeRun, Allow: plus(DefaultAllow, "somepackage"), DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}
	r := runProgram(t, cfg, "import code, sys\ncode.InteractiveInterpreter().runsource('import ctypes')\n"+
		"print('_ctypes' in sys.modules)\n", "")
	if strings.TrimSpace(r.stdout) != "True" || len(r.report.Violations) != 0 {
		t.Errorf("ctypes refused\n%s", r)
	}
}

// TestHelpChecked: help() imports through the program's checks. Where
// the policy refuses pydoc, help is refused and reported (the program's
// help, and the real one reached through sys.modules); where it allows
// pydoc, what help is asked for is imported as the program's.
func TestHelpChecked(t *testing.T) {
	requirePython(t)
	prog := "import sys\nfor h in (help, sys.modules['builtins'].help):\n    try:\n        h('subprocess')\n" +
		"    except ImportError as e:\n        print('refused', e.name)\n" +
		"print('subprocess' in sys.modules, 'pydoc' in sys.modules)\n"
	base := Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}
	r := runProgram(t, base, prog, "")
	if r.stdout != "refused pydoc\nrefused pydoc\nFalse False\n" ||
		!hasViolation(r.report, want{"import", "pydoc", 4, true}) {
		t.Errorf("pydoc refused\n%s", r)
	}
	withPydoc := with(base, func(c *Config) { c.Allow = plus(DefaultAllow, "pydoc") })
	r = runProgram(t, withPydoc, prog, "")
	if !strings.HasSuffix(r.stdout, "False True\n") || strings.Contains(r.stdout, "refused") ||
		!strings.Contains(r.stdout, "No Python documentation found for 'subprocess'") ||
		!hasViolation(r.report, want{"import", "subprocess", 4, true}) {
		t.Errorf("pydoc allowed\n%s", r)
	}
	// What help is asked for that the policy allows still works.
	r = runProgram(t, withPydoc, "help('json.dumps')\n", "")
	if !strings.Contains(r.stdout, "dumps(obj") || len(r.report.Violations) != 0 {
		t.Errorf("help('json.dumps')\n%s", r)
	}
}

// TestHookReadsNoGlobals checks that the hook's first half and its writer
// (guard.py's _core and _record) load no global or builtin and have no
// closure: all they use is their defaults, which a program cannot change.
func TestHookReadsNoGlobals(t *testing.T) {
	requirePython(t)
	const check = `
import dis, sys
g = {"__name__": "nsbox_runner_test"}
exec(compile(sys.stdin.read(), "runner.py", "exec"), g)
bad = []
for n in ("_core", "_record"):
    c = g[n].__code__
    ops = {i.opname for i in dis.get_instructions(c)}
    used = ops & {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF", "STORE_GLOBAL",
                  "IMPORT_NAME", "LOAD_CLOSURE"}
    if used or c.co_freevars or c.co_cellvars or c.co_kwonlyargcount:
        bad.append("%s: %s %s %s" % (n, sorted(used), c.co_freevars, c.co_cellvars))
    if any(hasattr(k, "co_code") for k in c.co_consts):
        bad.append("%s has nested code" % n)
print("\n".join(bad) or "ok")
`
	cmd := exec.Command(python, "-I", "-c", check)
	cmd.Stdin = strings.NewReader(Source)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("%v\n%s", err, out)
	}
}
