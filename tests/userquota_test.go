package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
)

// quotaAttack fills, from inside, the per-user kernel counts a run could
// once spend on host root's behalf: it queues real-time signals to itself
// (blocked, so they stay queued) and opens inotify instances, both
// bounded, then holds them until the test is done checking the host.
// Harmless if uncontained: it signals only itself, and every count is
// given back when it exits.
const quotaAttack = `
import ctypes, os, resource, signal, time
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
# One past this process's own limit, at most a million: kill never fails,
# a signal past the quota only loses its payload.
for _ in range(min(resource.getrlimit(resource.RLIMIT_SIGPENDING)[0], 1000000) + 1):
    os.kill(os.getpid(), sig)
sigq = [l.split()[1] for l in open("/proc/self/status") if l.startswith("SigQ:")][0]
libc = ctypes.CDLL(None, use_errno=True)
fds, why = [], ""
for _ in range(1000):
    fd = libc.inotify_init1(0)
    if fd < 0:
        why = os.strerror(ctypes.get_errno())
        break
    fds.append(fd)
print("SIGQ", sigq, "INOTIFY", len(fds), why, flush=True)
open("/workspace/ready", "w").close()
for _ in range(1000):
    if os.path.exists("/workspace/done"):
        break
    time.sleep(0.02)
`

// quotaProbe is what the concurrent run checks it can still do.
const quotaProbe = `
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print("INOTIFY", "ok" if fd >= 0 else os.strerror(ctypes.get_errno()))
tid = ctypes.c_void_p()
r = libc.timer_create(1, None, ctypes.byref(tid))   # CLOCK_MONOTONIC, SIGALRM, never armed
print("TIMER", "ok" if r == 0 else os.strerror(ctypes.get_errno()))
sig = signal.SIGRTMIN + 3
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
queued = lambda: int([l.split()[1] for l in open("/proc/self/status") if l.startswith("SigQ:")][0].split("/")[0])
before = queued()
os.kill(os.getpid(), sig)
print("SIGNAL", "ok" if queued() == before + 1 else "not queued")
`

// TestPerUserCountsStayInTheRun: a run that spends its per-user kernel
// counts (pending signals, inotify instances) to the limit leaves host
// root, and a run beside it, able to create an inotify instance and a
// POSIX timer and to queue a signal. The counts land on the run's own
// host uid (the owner of its user namespace), and the run is bounded by
// RLIMIT_SIGPENDING and its namespace's max_inotify_instances. Under
// permissive, default and strict, OS layer only.
func TestPerUserCountsStayInTheRun(t *testing.T) {
	needRoot(t)
	for _, policy := range []string{"permissive", "default", "strict"} {
		t.Run(policy, func(t *testing.T) {
			ws := sandboxWorkspace(t)
			pol := policy // permissive's Python layer allows everything already
			if policy != "permissive" {
				pol = osOnly(t, policy)
			}
			var hostErrs []string
			var beside *outcome
			o := nsbox(t, run{
				args: []string{"run", "--json", "--policy", pol, "--workspace", ws, "-c", quotaAttack},
				whileRuns: func(*os.Process) {
					defer os.WriteFile(filepath.Join(ws, "done"), nil, 0o644)
					if !waitFile(filepath.Join(ws, "ready"), 20*time.Second) {
						t.Errorf("attack never got ready")
						return
					}
					hostErrs = hostQuotaProbe()
					beside = runPyLayer(t, "permissive", quotaProbe)
				},
			})
			o.wantStatus(t, result.StatusOK)
			t.Logf("%s: %s", policy, strings.TrimSpace(o.res.Stdout))
			for _, e := range hostErrs {
				t.Errorf("host root, while the run held its counts: %s", e)
			}
			if beside == nil {
				t.Fatal("no concurrent run")
			}
			beside.wantStatus(t, result.StatusOK)
			for _, want := range []string{"INOTIFY ok", "TIMER ok", "SIGNAL ok"} {
				if !strings.Contains(beside.res.Stdout, want) {
					t.Errorf("concurrent run: want %q in %q", want, beside.res.Stdout)
				}
			}
			// The run's own bounds: SigQ is queued/limit of the program's
			// user; inotify instances stop at the namespace's limit (or
			// at once where seccomp refuses inotify).
			m := regexp.MustCompile(`SIGQ (\d+)/(\d+) INOTIFY (\d+)`).FindStringSubmatch(o.res.Stdout)
			if m == nil {
				t.Fatalf("attack printed %q", o.res.Stdout)
			}
			queued, limit, inotify := atoiOr(m[1]), atoiOr(m[2]), atoiOr(m[3])
			if limit != 1024 || queued != limit {
				t.Errorf("pending signals %d of %d: want RLIMIT_SIGPENDING 1024, reached", queued, limit)
			}
			if inotify > 32 {
				t.Errorf("%d inotify instances, want at most the run's max_inotify_instances 32", inotify)
			}
		})
	}
}

func atoiOr(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// hostQuotaProbe checks, as host root, what the attack must not have
// taken from it: an inotify instance, a POSIX timer, a queued real-time
// signal. It returns what failed.
func hostQuotaProbe() []string {
	var errs []string
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
		errs = append(errs, fmt.Sprintf("inotify_init1: %v", err))
	} else {
		unix.Close(fd)
	}
	// timer_create(CLOCK_MONOTONIC, NULL: SIGALRM): never armed, deleted.
	var timer int32
	if _, _, e := unix.Syscall(unix.SYS_TIMER_CREATE, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&timer))); e != 0 {
		errs = append(errs, fmt.Sprintf("timer_create: %v", e))
	} else {
		unix.Syscall(unix.SYS_TIMER_DELETE, uintptr(timer), 0, 0)
	}
	if err := queueSignalToSelf(); err != nil {
		errs = append(errs, err.Error())
	}
	return errs
}

// queueSignalToSelf queues a real-time signal to a thread of this process
// that blocks it (rt_tgsigqueueinfo, which fails with EAGAIN once the
// user's pending signals are at the limit, unlike kill), then takes it
// back with rt_sigtimedwait. The thread dies with its goroutine.
func queueSignalToSelf() error {
	const sig = 40 // a real-time signal the Go runtime does not use
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's mask changed
		set := uint64(1) << (sig - 1)
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, uintptr(unsafe.Pointer(&set)), 0, 8, 0, 0); e != 0 {
			errc <- fmt.Errorf("rt_sigprocmask: %v", e)
			return
		}
		var info [128]byte // siginfo_t: signo, errno, code (SI_QUEUE), pid, uid
		*(*int32)(unsafe.Pointer(&info[0])) = sig
		*(*int32)(unsafe.Pointer(&info[8])) = -1
		*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
		pid, tid := os.Getpid(), unix.Gettid()
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(pid), uintptr(tid), sig, uintptr(unsafe.Pointer(&info[0])), 0, 0); e != 0 {
			errc <- fmt.Errorf("rt_tgsigqueueinfo: %v", e)
			return
		}
		var ts unix.Timespec
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGTIMEDWAIT, uintptr(unsafe.Pointer(&set)), 0, uintptr(unsafe.Pointer(&ts)), 8, 0, 0); e != 0 {
			errc <- fmt.Errorf("rt_sigtimedwait: %v", e)
			return
		}
		errc <- nil
	}()
	return <-errc
}

// TestConcurrentRunsOwnUIDs: two runs at once have different host uids,
// each its own pair from the range, and each owns its user namespace.
func TestConcurrentRunsOwnUIDs(t *testing.T) {
	needRoot(t)
	code := `
import os, time
open("/workspace/ready", "w").close()
for _ in range(1000):
    if os.path.exists("/workspace/done"):
        break
    time.sleep(0.02)
`
	wsA, wsB := sandboxWorkspace(t), sandboxWorkspace(t)
	type ids struct{ uid, owner uint32 }
	look := func(p *os.Process, ws string) (got []ids) {
		if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
			t.Errorf("run in %s never got ready", ws)
			return nil
		}
		for _, c := range programOf(t, p.Pid) {
			b, err := os.ReadFile(filepath.Join("/proc", c, "status"))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" {
					n, _ := strconv.ParseUint(f[1], 10, 32)
					got = append(got, ids{uint32(n), usernsOwner(t, c)})
				}
			}
		}
		return got
	}
	var a, b []ids
	var ob *outcome
	oa := nsbox(t, run{
		args: []string{"run", "--json", "--workspace", wsA, "-c", code},
		whileRuns: func(pa *os.Process) {
			defer os.WriteFile(filepath.Join(wsA, "done"), nil, 0o644)
			ob = nsbox(t, run{
				args: []string{"run", "--json", "--workspace", wsB, "-c", code},
				whileRuns: func(pb *os.Process) {
					defer os.WriteFile(filepath.Join(wsB, "done"), nil, 0o644)
					b = look(pb, wsB)
					a = look(pa, wsA)
				},
			})
		},
	})
	oa.wantStatus(t, result.StatusOK)
	ob.wantStatus(t, result.StatusOK)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("want one program per run, found %v and %v", a, b)
	}
	for _, x := range []ids{a[0], b[0]} {
		if !isProgramID(x.uid) || x.owner != x.uid-1 {
			t.Errorf("program uid %d, namespace owner %d: want a program id of %s owned by the id below it", x.uid, x.owner, suiteIDs)
		}
	}
	if a[0].uid == b[0].uid {
		t.Errorf("both runs have host uid %d", a[0].uid)
	}
}

// quotaLimitsAttack tries what the run's own limits refuse: a user
// namespace (and with it capabilities), a fanotify group, POSIX message
// queues past RLIMIT_MSGQUEUE (8 queues of the largest size), locked memory past RLIMIT_MEMLOCK. It
// prints, for each, "ok" or the error.
const quotaLimitsAttack = `
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
def res(r):
    return "ok" if r >= 0 else os.strerror(ctypes.get_errno())
print("USERNS", res(libc.unshare(0x10000000)))           # CLONE_NEWUSER
print("FANOTIFY", res(libc.fanotify_init(0x200, 0)))     # FAN_REPORT_FID, O_RDONLY
class attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
a = attr(0, 10, 8192, 0)                                  # the largest a queue may be: 80 KiB
r = 0
for i in range(8):                                        # 640 KiB in all
    r = libc.mq_open(b"/nsbox-test-%d" % i, 0o102, 0o600, ctypes.byref(a))  # O_CREAT|O_RDWR
    if r < 0:
        break
print("MQUEUE", res(r))
buf = mmap.mmap(-1, 1 << 20)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
print("MLOCK", res(libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(1 << 20))))
`

// TestUserQuotasInside: a user namespace, a fanotify group, a large POSIX
// message queue and locked memory are refused under every built-in
// policy (OS layer only). Their seccomp profiles deny the first three
// before the kernel counts anything (and Landlock refuses the queue's
// file), so the run's own limits are proven under permissive with neither
// seccomp nor Landlock: the user namespace's
// max_user_namespaces and max_fanotify_groups (0) and the program's
// RLIMIT_MSGQUEUE and RLIMIT_MEMLOCK refuse them by themselves.
func TestUserQuotasInside(t *testing.T) {
	needRoot(t)
	noSeccomp := writePolicy(t, "permissive", map[string]string{`seccomp = "default"`: "seccomp = \"none\"\nlandlock = false"})
	for _, tc := range []struct {
		name, policy string
		want         []string
	}{
		{"permissive", "permissive", nil},
		{"default", osOnly(t, "default"), nil},
		{"strict", osOnly(t, "strict"), nil},
		{"permissive without seccomp and landlock", noSeccomp, []string{
			"USERNS No space left on device", "FANOTIFY Too many open files",
			"MQUEUE Too many open files", "MLOCK Cannot allocate memory",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runPyLayer(t, tc.policy, quotaLimitsAttack)
			o.wantStatus(t, result.StatusOK)
			t.Logf("%s: %q", tc.name, o.res.Stdout)
			if n := strings.Count(o.res.Stdout, "\n"); n != 4 {
				t.Fatalf("want 4 answers, got %q", o.res.Stdout)
			}
			for _, l := range strings.Split(strings.TrimSpace(o.res.Stdout), "\n") {
				if strings.HasSuffix(l, " ok") {
					t.Errorf("%s: allowed", l)
				}
			}
			for _, want := range tc.want {
				if !strings.Contains(o.res.Stdout, want) {
					t.Errorf("want %q in %q", want, o.res.Stdout)
				}
			}
		})
	}
}

// TestLockedSecurebitsRefused: started with SECBIT_NO_SETUID_FIXUP locked
// off, nsbox cannot make the run's own id the owner of its user namespace
// without losing the capabilities to set it up. It refuses the run,
// naming the securebits, rather than charge the run's per-user counts to
// host root.
func TestLockedSecurebitsRefused(t *testing.T) {
	needRoot(t)
	mustHave(t, "setpriv")
	o := nsbox(t, run{via: []string{"setpriv", "--securebits", "+no_setuid_fixup_locked"}, args: []string{"run", "--json", "-c", "print(1)"}})
	o.wantStatus(t, result.StatusSandboxError)
	if o.exit != result.ExitSandboxError || o.res.Error == nil || o.res.Error.Step != "start init" ||
		!strings.Contains(o.res.Error.Message, "securebits are 0x8") || o.res.Stdout != "" {
		t.Errorf("exit %d, error %+v, stdout %q: want step start init naming the locked securebits", o.exit, o.res.Error, o.res.Stdout)
	}
	o.noLeftovers(t)
}
