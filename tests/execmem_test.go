package tests

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// canaryC is a tiny ELF, harmless if it runs: it appends "ran" to
// /workspace/elf-ran and exits. Built as a position-independent shared
// object without libc, with _start as its entry point and the same write
// in a constructor, it runs by every route: execve (the kernel loads an
// ET_DYN without an interpreter like a static PIE), the dynamic loader run
// on it (ld.so FILE: the entry point), and dlopen (ctypes.CDLL: the
// constructor).
const canaryC = `
#include <sys/syscall.h>
#include <fcntl.h>
static long sys3(long n, long a, long b, long c) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
static void mark(void) {
	static const char path[] = "/workspace/elf-ran";
	long fd = sys3(SYS_open, (long)path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd >= 0) {
		sys3(SYS_write, fd, (long)"ran\n", 4);
		sys3(SYS_close, fd, 0, 0);
	}
}
__attribute__((constructor)) static void ctor(void) { mark(); }
__attribute__((force_align_arg_pointer, noreturn)) void _start(void) {
	mark();
	sys3(SYS_exit_group, 0, 0, 0);
	for (;;) {}
}
`

// buildCanary compiles canaryC with the host's C compiler and returns the
// ELF's bytes.
func buildCanary(t *testing.T) []byte {
	t.Helper()
	mustHave(t, "cc")
	dir := t.TempDir()
	src, out := filepath.Join(dir, "canary.c"), filepath.Join(dir, "canary.so")
	if err := os.WriteFile(src, []byte(canaryC), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cc", "-Os", "-fPIC", "-nostdlib", "-shared", "-s", "-Wl,-e,_start", "-Wl,--build-id=none", "-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
	elf, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return elf
}

// execMemProgram writes the ELF to each place the program can write
// (/workspace, /tmp, /dev/shm) and into a memfd, then tries to run it by
// every route: execve and execveat (os.execve on a descriptor) in a child,
// the dynamic loader run on it in a child (ld.so FILE), dlopen
// (ctypes.CDLL) and mmap with PROT_EXEC here. After each try it looks for
// the canary. It prints {place/route: outcome} as JSON, an outcome being
// "RAN" or why it did not. Where fork is refused (strict), execve and
// execveat are tried in this process (a success would end it, leaving the
// canary and no JSON) and ld.so, which would end it either way, is not.
const execMemProgram = `
import base64, ctypes, errno, glob, json, mmap, os
ELF = base64.b64decode(%q)
CANARY = "/workspace/elf-ran"
LDSO = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*"))[0]
out = {}

def ran():
    if os.path.exists(CANARY):
        os.unlink(CANARY)
        return True
    return False

def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__ + ": " + str(e)[:80]

try:
    pid = os.fork()
except OSError:
    can_fork = False
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    can_fork = True

def in_child(fn):
    if not can_fork:
        try:
            fn()
            return "returned"
        except Exception as e:
            return err(e)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn()
        except Exception as e:
            os.write(w, err(e).encode())
        os._exit(99)
    os.close(w)
    why = os.read(r, 200).decode()
    os.close(r)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return why or "exit %%d" %% code

def attempt(name, fn):
    try:
        what = fn()
    except Exception as e:
        what = err(e)
    out[name] = "RAN" if ran() else what

places = {}
for d in ("/workspace", "/tmp", "/dev/shm"):
    p = os.path.join(d, "elf")
    try:
        with open(p, "wb") as f:
            f.write(ELF)
        os.chmod(p, 0o755)
        places[d] = (p, os.open(p, os.O_RDONLY))
    except OSError as e:
        out[d + "/write"] = err(e)
try:
    fd = os.memfd_create("elf", 0)
    os.write(fd, ELF)
    os.set_inheritable(fd, True)
    places["memfd"] = ("/proc/self/fd/%%d" %% fd, fd)
except OSError as e:
    out["memfd/create"] = err(e)

for place, (path, fd) in places.items():
    attempt(place + "/execve", lambda: in_child(lambda: os.execv(path, [path])))
    attempt(place + "/execveat", lambda: in_child(lambda: os.execve(fd, [path], {})))
    if can_fork:
        attempt(place + "/ld.so", lambda: in_child(lambda: os.execv(LDSO, [LDSO, path])))
    attempt(place + "/dlopen", lambda: ctypes.CDLL(path) and "loaded")
    attempt(place + "/mmap", lambda: mmap.mmap(fd, len(ELF), prot=mmap.PROT_READ | mmap.PROT_EXEC) and "mapped")
print(json.dumps(out))
`

// TestNoExecutableFileFromProgram: an ELF the program writes to
// /workspace, /tmp, /dev/shm or a memfd runs by no route (execve,
// execveat, the dynamic loader run on it, dlopen, mmap with PROT_EXEC),
// under the OS layer of permissive, default and strict; no canary appears
// on the host. A control run with seccomp off shows that the payload does
// run where nothing stops it (from a memfd), so a pass is not the
// payload's own failure.
func TestNoExecutableFileFromProgram(t *testing.T) {
	needRoot(t)
	elf := buildCanary(t)
	code := strings.Replace(execMemProgram, "%q", pyStr(base64.StdEncoding.EncodeToString(elf)), 1)
	code = strings.ReplaceAll(code, "%%", "%")
	run := func(t *testing.T, policy string) (map[string]string, string, *result.Result) {
		t.Helper()
		ws := sandboxWorkspace(t)
		var o *outcome
		if policy == "permissive" {
			// Its Python layer already lets everything through.
			o = runPyLayer(t, policy, code, "--workspace", ws)
		} else {
			o = runPy(t, policy, code, "--workspace", ws)
		}
		canary := filepath.Join(ws, "elf-ran")
		_, statErr := os.Stat(canary)
		o.wantStatus(t, result.StatusOK)
		got := map[string]string{}
		if err := json.Unmarshal([]byte(o.res.Stdout), &got); err != nil {
			t.Fatalf("program output %q: %v\nstderr: %s", o.res.Stdout, err, o.res.Stderr)
		}
		if statErr == nil {
			got["host"] = "canary left in the workspace"
		}
		return got, ws, o.res
	}

	for _, policy := range []string{"permissive", "default", "strict"} {
		t.Run(policy, func(t *testing.T) {
			got, _, res := run(t, policy)
			t.Logf("%s: %v", policy, got)
			for k, v := range got {
				if v == "RAN" || k == "host" {
					t.Errorf("%s: the program's ELF ran (%s)", k, v)
				}
			}
			// Each place was written, each route tried (ld.so where the
			// policy lets the program fork), and memfd_create refused.
			if got["memfd/create"] != "EPERM" {
				t.Errorf("memfd_create: %q, want EPERM", got["memfd/create"])
			}
			for _, place := range []string{"/workspace", "/tmp", "/dev/shm"} {
				for _, route := range []string{"execve", "execveat", "dlopen", "mmap"} {
					if _, ok := got[place+"/"+route]; !ok {
						t.Errorf("%s/%s: not tried", place, route)
					}
				}
			}
			if res.Sandbox == nil || res.Sandbox.MemfdNoexec != result.MemfdNoexecSeccomp {
				t.Errorf("result sandbox %+v: want memfd_noexec %q", res.Sandbox, result.MemfdNoexecSeccomp)
			}
		})
	}

	// The control: permissive's OS layer without seccomp. The noexec
	// mounts still hold; a memfd, which they do not cover, runs the ELF by
	// every route, and the result says nothing stopped it.
	t.Run("control-seccomp-none", func(t *testing.T) {
		policy := writePolicy(t, "permissive", map[string]string{`seccomp = "default"`: `seccomp = "none"`})
		got, _, res := run(t, policy)
		t.Logf("seccomp none: %v", got)
		for _, route := range []string{"execve", "execveat", "ld.so", "dlopen"} {
			if got["memfd/"+route] != "RAN" {
				t.Errorf("control: memfd/%s: %q, want RAN: the payload cannot show what it tests", route, got["memfd/"+route])
			}
		}
		if got["memfd/mmap"] != "mapped" {
			t.Errorf("control: memfd/mmap: %q, want mapped", got["memfd/mmap"])
		}
		for _, place := range []string{"/workspace", "/tmp", "/dev/shm"} {
			for _, route := range []string{"execve", "execveat", "ld.so", "dlopen", "mmap"} {
				if v := got[place+"/"+route]; v == "RAN" || v == "mapped" || v == "loaded" {
					t.Errorf("control: %s/%s: %q through a noexec mount", place, route, v)
				}
			}
		}
		if res.Sandbox == nil || res.Sandbox.MemfdNoexec != result.MemfdNoexecNone {
			t.Errorf("control: result sandbox %+v: want memfd_noexec %q", res.Sandbox, result.MemfdNoexecNone)
		}
	})
}
