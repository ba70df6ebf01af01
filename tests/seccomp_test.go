package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// deniedCalls are the syscalls the built-in profiles deny with EPERM, as
// (name, number on x86_64, arguments). The arguments are chosen to be
// harmless if the call got through, and, where the kernel checks them
// before privileges, to give a different errno without the filter (the
// control run below shows which ones do).
var deniedCalls = []struct {
	name string
	nr   int
	args string
}{
	{"mount", 165, "0, 0, 0, 0, 0"},
	{"umount2", 166, `b"/nonexistent-nsbox", 0`},
	{"pivot_root", 155, "0, 0"},
	{"chroot", 161, `b"/nonexistent-nsbox"`},
	{"unshare(CLONE_NEWUSER)", 272, "0x10000000"},
	{"unshare(CLONE_NEWNS)", 272, "0x20000"},
	{"setns", 308, "-1, 0"},
	// CLONE_THREAD without CLONE_SIGHAND is invalid: without the filter
	// these fail with EINVAL instead of creating a process.
	{"clone(CLONE_NEWUSER)", 56, "0x10000000 | 0x10000, 0, 0, 0, 0"},
	{"clone(CLONE_NEWNET)", 56, "0x40000000 | 0x10000, 0, 0, 0, 0"},
	{"clone(CLONE_NEWPID)", 56, "0x20000000 | 0x10000, 0, 0, 0, 0"},
	{"keyctl", 250, "-1, 0, 0, 0, 0"},
	{"add_key", 248, "0, 0, 0, 0, 0"},
	{"request_key", 249, "0, 0, 0, 0"},
	{"bpf", 321, "-1, 0, 0"},
	{"perf_event_open", 298, "0, 0, -1, -1, 0"},
	{"userfaultfd", 323, "-1"},
	{"io_uring_setup", 425, "0, 0"},
	{"io_uring_enter", 426, "-1, 0, 0, 0, 0, 0"},
	{"io_uring_register", 427, "-1, 0, 0, 0"},
	{"kexec_load", 246, "0, 0, 0, 0"},
	{"kexec_file_load", 320, "-1, -1, 0, 0, 0"},
	{"init_module", 175, "0, 0, 0"},
	{"finit_module", 313, "-1, 0, 0"},
	{"delete_module", 176, "0, 0"},
	{"ptrace", 101, "-1, 0, 0, 0"},
	{"process_vm_readv", 310, "0, 0, 0, 0, 0, 0"},
	{"process_vm_writev", 311, "0, 0, 0, 0, 0, 0"},
	{"open_by_handle_at", 304, "-1, 0, 0"},
	{"name_to_handle_at", 303, "-1, 0, 0, 0, 0"},
	{"reboot", 169, "0, 0, 0, 0"},
	{"swapon", 167, "0, 0"},
	{"swapoff", 168, "0"},
	{"acct", 163, "0"},
	{"clock_settime", 227, "-1, 0"},
	{"clock_adjtime", 305, "-1, 0"},
	{"settimeofday", 164, "0, 0"},
	{"adjtimex", 159, "0"},
	{"personality(ADDR_NO_RANDOMIZE)", 135, "0x0040000"},
	{"socket(AF_NETLINK)", 41, "16, 3, 0"},
	{"socket(AF_PACKET)", 41, "17, 3, 0"},
	{"socket(AF_INET, SOCK_RAW)", 41, "2, 3, 1"},
	{"ioctl(TIOCSTI)", 16, "-1, 0x5412, 0"},
	{"ioctl(TIOCSTI|1<<32)", 16, "-1, 0x5412 | (1 << 32), 0"},
	{"ioctl(TIOCLINUX)", 16, "-1, 0x541C, 0"},
}

// syscallProbe is a Python program that makes every call in deniedCalls
// through ctypes and prints {name: errno name} as JSON.
func syscallProbe() string {
	var b strings.Builder
	b.WriteString(`
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else ctypes.c_char_p(a) for a in args])
    return "OK" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
out = {}
`)
	for _, c := range deniedCalls {
		b.WriteString("out[" + pyStr(c.name) + "] = call(" + itoa(c.nr))
		if c.args != "" {
			b.WriteString(", " + c.args)
		}
		b.WriteString(")\n")
	}
	b.WriteString(`
out["clone3"] = call(435, 0, 0)
out["unknown 1000"] = call(1000)
out["getpid"] = call(39)
out["personality(query)"] = call(135, 0xffffffff)
print(json.dumps(out))
`)
	return b.String()
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// probe runs syscallProbe under a policy and returns name -> errno name.
func probe(t *testing.T, policy string) map[string]string {
	t.Helper()
	o := runPy(t, policy, syscallProbe())
	o.wantStatus(t, result.StatusOK)
	var got map[string]string
	if err := json.Unmarshal([]byte(o.res.Stdout), &got); err != nil {
		t.Fatalf("probe output %q: %v", o.res.Stdout, err)
	}
	return got
}

// TestSeccompDeniesDangerousSyscalls calls every denied syscall from
// inside via ctypes under both built-in profiles: each fails with EPERM
// (an error the program can handle, not a crash); clone3 and an unknown
// number fail with ENOSYS so that glibc falls back. A control run with
// seccomp off shows that the filter, not a missing capability, produced
// the EPERM for the calls whose arguments fail otherwise.
func TestSeccompDeniesDangerousSyscalls(t *testing.T) {
	needRoot(t)
	for _, pol := range []string{"strict", "default"} {
		t.Run(pol, func(t *testing.T) {
			o := runPy(t, pol, "print(open('/proc/self/status').read())")
			o.wantStatus(t, result.StatusOK)
			if !strings.Contains(o.res.Stdout, "Seccomp:\t2") {
				t.Errorf("program not in seccomp filter mode")
			}
			if o.res.Sandbox == nil || o.res.Sandbox.Seccomp != pol {
				t.Errorf("result sandbox = %+v, want seccomp %q", o.res.Sandbox, pol)
			}
			got := probe(t, pol)
			for _, c := range deniedCalls {
				if got[c.name] != "EPERM" {
					t.Errorf("%s: %s, want EPERM", c.name, got[c.name])
				}
			}
			for name, want := range map[string]string{"clone3": "ENOSYS", "unknown 1000": "ENOSYS", "getpid": "OK", "personality(query)": "OK"} {
				if got[name] != want {
					t.Errorf("%s: %s, want %s", name, got[name], want)
				}
			}
		})
	}

	// Control: the same calls without the filter.
	pol := writePolicy(t, "permissive", map[string]string{`seccomp = "default"`: `seccomp = "none"`})
	control := probe(t, pol)
	differ := 0
	for _, c := range deniedCalls {
		if control[c.name] != "EPERM" {
			differ++
		}
	}
	t.Logf("without seccomp, %d of %d calls fail with something other than EPERM: %v", differ, len(deniedCalls), control)
	for _, name := range []string{"unshare(CLONE_NEWUSER)", "socket(AF_NETLINK)", "personality(ADDR_NO_RANDOMIZE)",
		"ioctl(TIOCSTI)", "ioctl(TIOCSTI|1<<32)", "bpf", "clone3", "clone(CLONE_NEWUSER)", "mount", "keyctl", "io_uring_setup"} {
		if control[name] == "EPERM" || control[name] == "ENOSYS" {
			t.Errorf("control run: %s gave %s without the filter; the test cannot tell the filter's work apart", name, control[name])
		}
	}
}

// TestWorkloadsUnderDefaultProfile: everyday Python runs cleanly under
// default.json and Landlock: threads (clone3 falls back to clone),
// multiprocessing with fork, asyncio, sqlite3, an ssl context, hashlib,
// zlib, decimal, tempfile in /tmp, mmap, and numpy when the interpreter
// has it. asyncio and sockets go over AF_UNIX; TCP on loopback is refused,
// and works with loopback_sockets (default+loopback).
func TestWorkloadsUnderDefaultProfile(t *testing.T) {
	needRoot(t)
	code := `
import threading, multiprocessing, asyncio, sqlite3, ssl, hashlib, zlib, decimal, tempfile, mmap, os, json, select, socket, subprocess
done = {}
t = threading.Thread(target=lambda: done.__setitem__("thread", True)); t.start(); t.join()
with multiprocessing.get_context("fork").Pool(2) as p:
    done["pool"] = p.map(abs, [-1, -2, -3]) == [1, 2, 3]
q = multiprocessing.get_context("fork").Queue(); pr = multiprocessing.get_context("fork").Process(target=q.put, args=(7,)); pr.start(); done["process"] = q.get(timeout=10) == 7; pr.join()
TCP = __TCP__
async def main():
    if TCP:
        srv = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        r, w = await asyncio.open_connection(*srv.sockets[0].getsockname())
    else:
        path = tempfile.mktemp(dir="/tmp")
        srv = await asyncio.start_unix_server(lambda r, w: w.close(), path)
        r, w = await asyncio.open_unix_connection(path)
    w.close()
    srv.close()
    return True
done["asyncio"] = asyncio.run(main())
db = sqlite3.connect(":memory:"); db.execute("create table t(x)"); db.execute("insert into t values (1)"); done["sqlite"] = db.execute("select x from t").fetchone() == (1,)
done["ssl"] = ssl.create_default_context() is not None
done["hashlib"] = hashlib.sha256(b"x").hexdigest().startswith("2d711642")
done["zlib"] = zlib.decompress(zlib.compress(b"abc" * 100)) == b"abc" * 100
done["decimal"] = str(decimal.Decimal(1) / decimal.Decimal(7))[:8] == "0.142857"
with tempfile.NamedTemporaryFile(dir="/tmp") as f:
    f.write(b"x" * 4096); f.flush()
    m = mmap.mmap(f.fileno(), 4096); done["mmap"] = m[:1] == b"x"; m.close()
a, b = socket.socketpair(); a.send(b"p"); done["socketpair"] = b.recv(1) == b"p"
try:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); c = socket.create_connection(s.getsockname()); done["loopback tcp"] = s.accept()[0] is not None
except PermissionError:
    done["loopback tcp"] = not TCP
done["select"] = select.epoll() is not None
done["devnull"] = open(os.devnull, "w").write("x") == 1
try:
    import numpy
    if numpy.__file__:  # not an empty namespace directory
        done["numpy"] = float(numpy.arange(10).sum()) == 45.0
except ImportError:
    pass
print(json.dumps(done))
`
	// default's OS layer with loopback sockets.
	src, err := os.ReadFile(osOnly(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	loopback := filepath.Join(t.TempDir(), "default-os-only-loopback.toml")
	if err := os.WriteFile(loopback, bytes.Replace(src, []byte("loopback_sockets = false"), []byte("loopback_sockets = true"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ policy, filter, tcp string }{
		{osOnly(t, "default"), "default", "False"},
		{loopback, "default+loopback", "True"},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			o := runPy(t, tc.policy, strings.Replace(code, "__TCP__", tc.tcp, 1))
			o.wantStatus(t, result.StatusOK)
			var done map[string]bool
			if err := json.Unmarshal([]byte(o.res.Stdout), &done); err != nil {
				t.Fatalf("output %q: %v", o.res.Stdout, err)
			}
			for _, k := range []string{"thread", "pool", "process", "asyncio", "sqlite", "ssl", "hashlib", "zlib", "decimal", "mmap", "socketpair", "loopback tcp", "select", "devnull"} {
				if !done[k] {
					t.Errorf("%s failed under %s: %v", k, tc.filter, done)
				}
			}
			if o.res.Sandbox == nil || o.res.Sandbox.LandlockABI == 0 || o.res.Sandbox.Seccomp != tc.filter {
				t.Errorf("want Landlock active and filter %s: %+v", tc.filter, o.res.Sandbox)
			}
		})
	}
}
