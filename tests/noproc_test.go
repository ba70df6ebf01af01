package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// builtinForkExec makes a fresh _posixsubprocess through importlib's
// BuiltinImporter, which raises no audit event, and starts a process with
// its fork_exec (CPython 3.11's signature): with __MODE__ "exec", the
// vfork route subprocess takes, running /venv/bin/python to create
// /workspace/canary; with "fork", a forked child (a preexec_fn forces
// fork) that only creates the canary and exits. It prints "started" or
// "refused ERRNO". Harmless if it runs: one empty file in the workspace.
const builtinForkExec = `
import importlib.machinery as m
import os

spec = m.BuiltinImporter.find_spec("_posixsubprocess")
mod = m.BuiltinImporter.create_module(spec)


def child() -> None:
    open("/workspace/canary", "w").close()
    os._exit(0)


preexec = child if "__MODE__" == "fork" else None
r, w = os.pipe()
try:
    pid = mod.fork_exec(
        [b"/venv/bin/python", b"-c", b"open('/workspace/canary', 'w').close()"], [b"/venv/bin/python"],
        True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w,
        True, False, -1, None, None, None, -1, preexec, preexec is None)
except OSError as e:
    print("refused", e.errno)
else:
    os.close(w)
    os.read(r, 1)
    os.waitpid(pid, 0)
    print("started")
`

// TestNoProcBuiltinImporter: the route the audit hook cannot see. Under
// permissive (no process event denied) it starts a process and the canary
// appears, which proves the payload works; under every shipped policy
// that denies the process events, the +noproc filter refuses it in the
// kernel with EPERM and no canary appears.
func TestNoProcBuiltinImporter(t *testing.T) {
	needRoot(t)
	for _, mode := range []string{"exec", "fork"} {
		code := strings.Replace(builtinForkExec, "__MODE__", mode, 1)
		for _, tc := range []struct{ policy, filter, want string }{
			// Control first: the test can fail.
			{"permissive", "default", "started"},
			{"default", "default+noproc", "refused 1"},
			{"datasci-min", "default+noproc", "refused 1"},
			{"web", "default+proxy+noproc", "refused 1"},
		} {
			t.Run(mode+"/"+tc.policy, func(t *testing.T) {
				ws := sandboxWorkspace(t)
				o := nsbox(t, run{args: []string{"run", "--json", "--policy", tc.policy, "--workspace", ws, "-c", code}})
				o.wantStatus(t, result.StatusOK)
				if got := strings.TrimSpace(o.res.Stdout); got != tc.want {
					t.Errorf("payload: %q, want %q (stderr %s)", got, tc.want, o.res.Stderr)
				}
				_, err := os.Stat(filepath.Join(ws, "canary"))
				if created, want := err == nil, tc.want == "started"; created != want {
					t.Errorf("canary created: %v, want %v", created, want)
				}
				if o.res.Sandbox == nil || o.res.Sandbox.Seccomp != tc.filter {
					t.Errorf("result sandbox %+v, want seccomp %q", o.res.Sandbox, tc.filter)
				}
			})
		}
	}
}

// TestNoProcThreads: threads still work under the +noproc filter: clone
// with CLONE_THREAD is allowed.
func TestNoProcThreads(t *testing.T) {
	needRoot(t)
	code := `
import concurrent.futures
import threading

seen = set()
lock = threading.Lock()


def work(n: int) -> int:
    with lock:
        seen.add(threading.get_ident())
    return n * n


t = threading.Thread(target=work, args=(3,))
t.start()
t.join()
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    total = sum(ex.map(work, range(100)))
print(total, len(seen) > 1)
`
	o := runPyLayer(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	if got := strings.TrimSpace(o.res.Stdout); got != "328350 True" {
		t.Errorf("threads: %q, want %q (stderr %s)", got, "328350 True", o.res.Stderr)
	}
	if o.res.Sandbox == nil || o.res.Sandbox.Seccomp != "default+noproc" {
		t.Errorf("result sandbox %+v, want seccomp default+noproc", o.res.Sandbox)
	}
}
