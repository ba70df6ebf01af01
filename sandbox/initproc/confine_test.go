package initproc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// childEnv selects the helper role of the re-executed test binary.
const childEnv = "NSBOX_INITPROC_TEST_CHILD"

// TestMain lets the test binary act as a confined child: Landlock and
// rlimits apply to the calling thread and its execs, so they are tried in
// a separate process, never in the test process itself.
func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "landlock":
		os.Exit(landlockChild(os.Getenv("DIR")))
	case "rlimits":
		os.Exit(rlimitsChild())
	case "landlock-net":
		os.Exit(landlockNetChild(os.Getenv("ALLOWED"), os.Getenv("OTHER")))
	}
	os.Exit(m.Run())
}

func reexec(t *testing.T, role string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", role, err, out)
	}
	return string(out)
}

// landlockChild restricts itself to writing only in DIR/rw and reports
// what a write in DIR/ro, a write in DIR/rw and a read in DIR/ro give.
func landlockChild(dir string) int {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("prctl:", err)
		return 1
	}
	abi, err := restrictPaths([]string{filepath.Join(dir, "rw")}, []string{"/dev/null"})
	if err != nil {
		fmt.Println("restrict:", err)
		return 1
	}
	try := func(what string, f func() error) {
		err := f()
		var errno syscall.Errno
		switch {
		case err == nil:
			fmt.Printf("%s=ok\n", what)
		case errors.As(err, &errno):
			fmt.Printf("%s=%s\n", what, unix.ErrnoName(errno))
		default:
			fmt.Printf("%s=%v\n", what, err)
		}
	}
	fmt.Printf("abi=%d\n", abi)
	try("write-ro", func() error { return os.WriteFile(filepath.Join(dir, "ro", "new"), []byte("x"), 0o644) })
	try("write-rw", func() error { return os.WriteFile(filepath.Join(dir, "rw", "new"), []byte("x"), 0o644) })
	try("read-ro", func() error { _, err := os.ReadFile(filepath.Join(dir, "ro", "old")); return err })
	try("devnull", func() error { return os.WriteFile("/dev/null", []byte("x"), 0) })
	return 0
}

// TestLandlockOnlyWritableDirs: under the ruleset a write outside the
// writable directories fails with EACCES even though the directory's
// mode allows it (the file system is writable: only Landlock says no).
func TestLandlockOnlyWritableDirs(t *testing.T) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		mustwork.Skip(t, "kernel without Landlock: %v", err)
	}
	dir := t.TempDir()
	for _, d := range []string{"ro", "rw"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ro", "old"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := reexec(t, "landlock", "DIR="+dir)
	for _, want := range []string{fmt.Sprintf("abi=%d", abi), "write-ro=EACCES", "write-rw=ok", "read-ro=ok", "devnull=ok"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want %q in child output:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ro", "new")); err == nil {
		t.Error("the write outside the writable dirs reached the disk")
	}
}

// landlockNetChild restricts itself as allowlist mode does (connect to
// the port of ALLOWED only) and reports what connecting to ALLOWED and to
// OTHER, and binding a port, give.
func landlockNetChild(allowed, other string) int {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("prctl:", err)
		return 1
	}
	ap, err := netip.ParseAddrPort(allowed)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if _, err := restrict([]string{"/tmp"}, nil, []uint16{ap.Port()}); err != nil {
		fmt.Println("restrict:", err)
		return 1
	}
	try := func(what string, f func(fd int) error) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			defer unix.Close(fd)
			err = f(fd)
		}
		var errno syscall.Errno
		switch {
		case err == nil:
			fmt.Printf("%s=ok\n", what)
		case errors.As(err, &errno):
			fmt.Printf("%s=%s\n", what, unix.ErrnoName(errno))
		default:
			fmt.Printf("%s=%v\n", what, err)
		}
	}
	connect := func(addr string) func(int) error {
		ap := netip.MustParseAddrPort(addr)
		return func(fd int) error {
			return unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
		}
	}
	try("connect-allowed", connect(allowed))
	try("connect-other", connect(other))
	try("bind", func(fd int) error { return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}) })
	return 0
}

// TestLandlockNetOnlyProxyPort: with allowlist mode's ruleset, TCP
// reaches the proxy's port only (EACCES for another listening port) and
// no port can be bound. The listeners are the test's own on 127.0.0.1.
func TestLandlockNetOnlyProxyPort(t *testing.T) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 4 {
		mustwork.Skip(t, "kernel without Landlock network rules (ABI %d < 4): %v", abi, err)
	}
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	out := reexec(t, "landlock-net", "ALLOWED="+addrs[0], "OTHER="+addrs[1])
	for _, want := range []string{"connect-allowed=ok", "connect-other=EACCES", "bind=EACCES"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want %q in child output:\n%s", want, out)
		}
	}
}

// rlimitsChild starts with RLIMIT_FSIZE at 1 MiB, asks setRlimits for
// 2 MiB (must stay at 1 MiB: limits are only lowered) and NOFILE 64, then
// execs /bin/sh to print what the exec'd program sees (Go must not
// restore the NOFILE it saved at start-up).
func rlimitsChild() int {
	if err := syscall.Setrlimit(unix.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	err := setRlimits([]spec.Rlimit{
		{Resource: unix.RLIMIT_NOFILE, Cur: 64, Max: 64},
		{Resource: unix.RLIMIT_FSIZE, Cur: 2 << 20, Max: 2 << 20},
	})
	if err != nil {
		fmt.Println("setRlimits:", err)
		return 1
	}
	err = syscall.Exec("/bin/sh", []string{"sh", "-c", "echo nofile=$(ulimit -n)/$(ulimit -Hn) fsize=$(ulimit -f)/$(ulimit -Hf)"}, nil)
	fmt.Println("exec:", err)
	return 1
}

// TestRlimitsLoweredAndKeptAcrossExec: the exec'd program sees the
// lowered NOFILE, and a limit above the current one is not raised.
func TestRlimitsLoweredAndKeptAcrossExec(t *testing.T) {
	out := reexec(t, "rlimits")
	// sh's ulimit -f counts 512-byte blocks: 1 MiB is 2048, 2 MiB 4096.
	if want := "nofile=64/64 fsize=2048/2048"; !strings.Contains(out, want) {
		t.Errorf("child after exec: %q, want %q", out, want)
	}
}
