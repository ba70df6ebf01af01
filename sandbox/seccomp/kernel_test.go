package seccomp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// The kernel tests re-execute the test binary (-test.run=^TestHelperChild$)
// so that the filter, which cannot be removed, lands in a child only. The
// parent loads the filter (as the supervisor does: the build-time golden
// of a built-in profile, or libseccomp's compile to compare it with), the
// child only reads raw BPF and calls load.Install (as the init does).
const (
	helperEnv = "NSBOX_SECCOMP_HELPER" // "probe" or "exec"
	bpfEnv    = "NSBOX_SECCOMP_BPF"    // file holding Program.Raw
	argEnv    = "NSBOX_SECCOMP_ARG"    // probe: a scratch dir; exec: profile name
	python    = "/usr/bin/python3.11"  // the host Python the built-in policies use
)

// TestHelperChild is the re-executed child; run directly it does nothing.
func TestHelperChild(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	if err := helperChild(mode); err != nil {
		fmt.Printf("helper error: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// helperChild installs the filter on this thread, the init's way, then
// probes it (mode "probe") or execs Python under it (mode "exec").
func helperChild(mode string) error {
	// The filter is per thread: every call below must come from this one.
	runtime.LockOSThread()
	raw, err := os.ReadFile(os.Getenv(bpfEnv))
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if err := load.Install(raw); err != nil {
		return err
	}
	// Nothing risky is called unless the filter is proven in place. (Read
	// from /proc: the strict profile denies prctl.)
	if err := checkFiltered(); err != nil {
		return err
	}
	if mode == "exec" {
		script, err := filepath.Abs("testdata/workload.py")
		if err != nil {
			return err
		}
		// The program starts filtered: the init's execve, exactly.
		argv := []string{python, "-I", script, os.Getenv(argEnv)}
		return fmt.Errorf("execve %s: %w", python, unix.Exec(python, argv, os.Environ()))
	}
	for _, p := range probes(os.Getenv(argEnv)) {
		r1, _, errno := unix.RawSyscall6(p.nr, p.args[0], p.args[1], p.args[2], p.args[3], p.args[4], p.args[5])
		if errno == 0 && p.closeFD {
			unix.Close(int(r1))
		}
		fmt.Printf("probe %s %d\n", p.name, int(errno))
	}
	return nil
}

// checkFiltered reads this thread's seccomp mode from /proc.
func checkFiltered() error {
	const path = "/proc/thread-self/status"
	status, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("after Install: read %s: %w", path, err)
	}
	if !bytes.Contains(status, []byte("\nSeccomp:\t2\n")) {
		return fmt.Errorf("after Install: %s does not say \"Seccomp: 2\" (filter mode)", path)
	}
	return nil
}

type probe struct {
	name    string
	nr      uintptr
	args    [6]uintptr
	closeFD bool
}

// probes are syscalls that do no harm even unfiltered (bad paths, bad
// magic, contradictory flags), run as root in the child only.
func probes(dir string) []probe {
	str := func(s string) uintptr {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			panic(err)
		}
		return uintptr(unsafe.Pointer(p))
	}
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		panic(err)
	}
	var c byte
	return []probe{
		{name: "getpid", nr: unix.SYS_GETPID},
		// Unfiltered: ENOENT, neither path exists.
		{name: "mount", nr: unix.SYS_MOUNT, args: [6]uintptr{str(dir + "/no-src"), str(dir + "/no-dst"), str("tmpfs")}},
		// Unfiltered: EINVAL in a multithreaded process.
		{name: "unshare", nr: unix.SYS_UNSHARE, args: [6]uintptr{unix.CLONE_NEWUSER}},
		// Unfiltered: EINVAL, CLONE_NEWUSER with CLONE_FS is refused.
		{name: "clone-newuser", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_FS}},
		// Unfiltered: EINVAL, size 0.
		{name: "clone3", nr: unix.SYS_CLONE3},
		{name: "socket-netlink", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC}, closeFD: true},
		{name: "socket-inet", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, closeFD: true},
		{name: "socket-inet6-tcp", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP}, closeFD: true},
		{name: "socket-inet-udp", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}, closeFD: true},
		{name: "socket-inet6-udp", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}, closeFD: true},
		// Unfiltered (the child is root): a raw socket, closed at once.
		{name: "socket-inet-raw", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_INET, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP}, closeFD: true},
		{name: "socket-unix", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, closeFD: true},
		// Unfiltered: a new memfd, sealed against execution or not.
		{name: "memfd", nr: unix.SYS_MEMFD_CREATE, args: [6]uintptr{str("x"), unix.MFD_CLOEXEC}, closeFD: true},
		{name: "memfd-noexec-seal", nr: unix.SYS_MEMFD_CREATE, args: [6]uintptr{str("x"), unix.MFD_CLOEXEC | 8}, closeFD: true},
		// Unfiltered: EINVAL, no attributes.
		{name: "bpf", nr: unix.SYS_BPF, args: [6]uintptr{unix.BPF_MAP_CREATE}},
		// Unfiltered: EINVAL, bad magic.
		{name: "reboot", nr: unix.SYS_REBOOT, args: [6]uintptr{1, 2, 3}},
		// Unfiltered: EINVAL, an unknown flag.
		{name: "kexec_load", nr: unix.SYS_KEXEC_LOAD, args: [6]uintptr{0, 0, 0, 0x100}},
		// Unfiltered: ENOTTY, a pipe is no terminal.
		{name: "ioctl-tiocsti-high", nr: unix.SYS_IOCTL, args: [6]uintptr{uintptr(pipe[0]), tiocsti | highBit, uintptr(unsafe.Pointer(&c))}},
		{name: "ioctl-fionread", nr: unix.SYS_IOCTL, args: [6]uintptr{uintptr(pipe[0]), fionread, uintptr(unsafe.Pointer(&c))}},
		// Unfiltered: changes this short-lived child's persona only.
		{name: "personality-addr-no-randomize", nr: unix.SYS_PERSONALITY, args: [6]uintptr{addrNoRandomize}},
		{name: "personality-query", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0xffffffff}},
		// Unfiltered: the buffer size; not in either allowlist.
		{name: "syslog", nr: unix.SYS_SYSLOG, args: [6]uintptr{10}},
		{name: "nr-1000", nr: 1000},
	}
}

// TestKernelProbes installs each built-in profile in a child and checks
// the errno of each probe, from inside: the golden a run loads, and what
// libseccomp compiles from the profile now (the same bytes, which
// TestLoadFilterBuiltin and gen's TestGoldens check; here they must also
// behave alike).
func TestKernelProbes(t *testing.T) {
	requireFilterMode(t)
	common := map[string]unix.Errno{
		"getpid": 0, "mount": unix.EPERM, "unshare": unix.EPERM, "clone-newuser": unix.EPERM,
		"clone3": unix.ENOSYS, "socket-netlink": unix.EPERM, "socket-unix": 0, "bpf": unix.EPERM,
		"reboot": unix.EPERM, "kexec_load": unix.EPERM, "ioctl-tiocsti-high": unix.EPERM, "ioctl-fionread": 0,
		"personality-addr-no-randomize": unix.EPERM, "personality-query": 0,
		"syslog": unix.ENOSYS, "nr-1000": unix.ENOSYS, "memfd": unix.EPERM, "memfd-noexec-seal": unix.EPERM,
	}
	// What the kernel answers an AF_INET6 socket the filter lets through:
	// 0, unless this host has no IPv6 (ipv6.disable=1: EAFNOSUPPORT).
	inet6 := unix.Errno(0)
	if fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
		if !errors.As(err, &inet6) {
			t.Fatalf("socket(AF_INET6): %v", err)
		}
	} else {
		unix.Close(fd)
	}
	// The IP sockets: every one refused by a profile, every one allowed
	// by its loopback variant, TCP only by its proxy variant.
	refused := map[string]unix.Errno{"socket-inet": unix.EPERM, "socket-inet6-tcp": unix.EPERM, "socket-inet-udp": unix.EPERM, "socket-inet6-udp": unix.EPERM, "socket-inet-raw": unix.EPERM}
	loopback := map[string]unix.Errno{"socket-inet": 0, "socket-inet6-tcp": inet6, "socket-inet-udp": 0, "socket-inet6-udp": inet6, "socket-inet-raw": 0}
	proxy := map[string]unix.Errno{"socket-inet": 0, "socket-inet6-tcp": inet6, "socket-inet-udp": unix.EPERM, "socket-inet6-udp": unix.EPERM, "socket-inet-raw": unix.EPERM}
	for _, c := range []struct {
		profile string
		source  filterSource
		inet    map[string]unix.Errno
	}{
		{"default", golden, refused},
		{"default", compiledNow, refused},
		{"default" + LoopbackSuffix, golden, loopback},
		{"default" + LoopbackSuffix, compiledNow, loopback},
		{"default" + ProxySuffix, golden, proxy},
		{"default" + ProxySuffix, compiledNow, proxy},
		{"strict", golden, refused},
		{"strict", compiledNow, refused},
		{"strict" + LoopbackSuffix, golden, loopback},
		{"strict" + LoopbackSuffix, compiledNow, loopback},
		{"strict" + ProxySuffix, golden, proxy},
		{"strict" + ProxySuffix, compiledNow, proxy},
	} {
		profile, inet := c.profile, c.inet
		t.Run(profile+"/"+string(c.source), func(t *testing.T) {
			dir := t.TempDir()
			out, err := runHelper(t, "probe", c.source, profile, dir)
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			got := map[string]unix.Errno{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 3 && f[0] == "probe" {
					n, _ := strconv.Atoi(f[2])
					got[f[1]] = unix.Errno(n)
				}
			}
			want := maps.Clone(inet)
			maps.Copy(want, common)
			for name, w := range want {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s: no result\n%s", name, out)
				case g != w:
					t.Errorf("%s: errno %d (%v), want %d (%v)", name, int(g), g, int(w), w)
				}
			}
		})
	}
}

// TestKernelWorkload execs Python under each profile's filter as a run
// loads it (LoadFilter: the golden), as the init does,
// and runs testdata/workload.py: threads, fork and multiprocessing,
// subprocess, asyncio, sockets, sqlite3, ssl, compression, mmap, signals,
// timers, ctypes and (if installed) numpy, plus the denials seen from Python.
func TestKernelWorkload(t *testing.T) {
	requireFilterMode(t)
	if _, err := os.Stat(python); err != nil {
		if mustWork() {
			t.Fatalf("%s: %v (NSBOX_MUST_WORK=1; scripts/install-deps.sh installs it)", python, err)
		}
		t.Skipf("%s: %v", python, err)
	}
	for _, profile := range Builtins() {
		t.Run(profile, func(t *testing.T) {
			out, err := runHelper(t, "exec", golden, profile, profile)
			if err != nil || !bytes.Contains(out, []byte("ALL OK")) {
				t.Fatalf("workload under %s: %v\n%s", profile, err, out)
			}
			t.Logf("%s", out)
			if bytes.Contains(out, []byte("skip numpy")) {
				t.Logf("numpy is not installed: its section did not run (apt-get install python3-numpy)")
			}
		})
	}
}

// filterSource is where runHelper gets a built-in profile's filter.
type filterSource string

const (
	golden      filterSource = "golden"     // LoadFilter, as a run does
	compiledNow filterSource = "libseccomp" // Load and Compile now
)

// runHelper loads profile's filter from source, hands the raw BPF to a
// re-executed child and returns its combined output.
func runHelper(t *testing.T, mode string, source filterSource, profile, arg string) ([]byte, error) {
	t.Helper()
	var prog *Program
	var err error
	if source == golden {
		prog, err = LoadFilter(profile, "")
	} else {
		prog, err = mustLoad(t, profile).Compile()
	}
	if err != nil {
		t.Fatal(err)
	}
	bpfFile := filepath.Join(t.TempDir(), profile+".bpf")
	if err := os.WriteFile(bpfFile, prog.Raw, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, bpfEnv+"="+bpfFile, argEnv+"="+arg, "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGSYS {
		err = fmt.Errorf("%w (SIGSYS: killed by the filter)", err)
	}
	return out, err
}

// requireFilterMode skips (or, under NSBOX_MUST_WORK=1, fails) on a
// kernel without seccomp filter mode.
func requireFilterMode(t *testing.T) {
	t.Helper()
	if ok, why := Supported(); !ok {
		if mustWork() {
			t.Fatalf("seccomp not supported (NSBOX_MUST_WORK=1): %s", why)
		}
		t.Skipf("seccomp not supported: %s", why)
	}
}
