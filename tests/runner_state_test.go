package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// runnerStateAttack goes after the runner's enforcement state from inside
// a real sandbox under the default policy: it finds the runner's globals
// through frames and gc, empties or flips everything there (the policy's
// denied events, re-entrancy sets, flags), replaces every function in
// them, tries to swap the code of the runner's functions, then tries
// what the policy denies. First it loads ctypes as library code (through
// the code module), which must fail. The payloads are harmless: a forked
// child that exits at once, and commands that would write a file in the
// workspace.
const runnerStateAttack = `
import asyncio, code, gc, os, sys, threading, types
code.InteractiveInterpreter().runsource("import ctypes")
print("ctypes" in sys.modules)
me = threading.get_ident()
sub, fork_exec = sys.modules["subprocess"], sys.modules["_posixsubprocess"].fork_exec
def noop(*a, **k):
    return None
found = [o for o in gc.get_objects() if type(o) is dict and "_State" in o]
f = sys._getframe()
while f is not None:
    if "_State" in f.f_globals:
        found.append(f.f_globals)
    f = f.f_back
for g in found:
    for k, v in list(g.items()):
        if type(v) is type:
            for a, x in list(vars(v).items()):
                try:
                    if isinstance(x, set):
                        x.add(me)
                    elif isinstance(x, (dict, frozenset)):
                        setattr(v, a, type(x)())
                    elif type(x) is bool:
                        setattr(v, a, not x)
                    elif hasattr(x, "__dict__") and not callable(x):
                        for n, y in list(vars(x).items()):
                            setattr(x, n, frozenset() if isinstance(y, frozenset) else y)
                except Exception:
                    pass
        elif type(v) is types.FunctionType:
            try:
                v.__code__ = noop.__code__
            except Exception:
                pass
            if k != "_main":
                g[k] = noop
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    open("/workspace/forked", "w").close()
except PermissionError:
    print("fork refused")
try:
    sub.run(["/bin/sh", "-c", "echo > /workspace/ran"])
except PermissionError:
    print("run refused")
try:
    r, w = os.pipe()
    fork_exec(["/bin/sh", "-c", "echo > /workspace/ran"], [b"/bin/sh"], True, (w,), None, None,
              -1, -1, -1, -1, -1, -1, r, w, True, False, 0, None, None, None, -1, None, False)
except PermissionError:
    print("fork_exec refused")
`

// TestRunnerStateOutOfReach: in a real sandbox under default, a program
// that changes what it finds of the runner through frames and gc still
// cannot fork or start a process, and each refusal is recorded.
func TestRunnerStateOutOfReach(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	o := runPyLayer(t, "default", runnerStateAttack, "--workspace", ws)
	for _, f := range []string{"forked", "ran"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
			t.Errorf("%s exists: a denied action ran (stdout %q, stderr %q)", f, o.res.Stdout, o.res.Stderr)
		}
	}
	if o.res.Stdout != "False\nfork refused\nrun refused\nfork_exec refused\n" {
		t.Errorf("stdout %q, stderr %q: want each attempt refused", o.res.Stdout, o.res.Stderr)
	}
	got := map[string]bool{}
	for _, v := range o.res.Violations {
		got[v.Name] = true
	}
	for _, name := range []string{"_ctypes", "os.fork", "subprocess.Popen", "object.__setattr__"} {
		if !got[name] {
			t.Errorf("no violation %q in %+v", name, o.res.Violations)
		}
	}
	if o.res.Status == result.StatusPolicyViolation && !strings.Contains(o.res.Reason, "refused") {
		t.Errorf("status %s: %s", o.res.Status, o.res.Reason)
	}

	// help() under default, which refuses pydoc: refused and recorded,
	// and what it was asked for is not imported.
	o = runPyLayer(t, "default", "import sys\ntry:\n    help('subprocess')\nexcept ImportError:\n    pass\n"+
		"print('subprocess' in sys.modules, 'pydoc' in sys.modules)\n")
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "False False\n" || len(o.res.Violations) != 1 || o.res.Violations[0].Name != "pydoc" {
		t.Errorf("help('subprocess'): stdout %q, violations %+v", o.res.Stdout, o.res.Violations)
	}
}
