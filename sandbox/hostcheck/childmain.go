package hostcheck

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/loopback"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// ChildMain runs one probe inside the namespaces its parent created and
// returns the exit status: 0 with the result on stdout, or 1 with the
// failed operation on stderr. args are what follows ChildCommand:
//
//	ns NAME          do the run's first step in namespace NAME, print its id
//	mount-api DIR    attach the detached mount at fd 3 on DIR, check it is read-only
//	proc-subset DIR  mount a procfs with subset=pid on DIR, check what it shows
//	cgroup           print this process's cgroup v2 path
//
// Everything it changes belongs to namespaces that die with it.
//
// A failure whose cause is an errno exits with errnoExitBase+errno, so the
// parent can tell EPERM from EINVAL without parsing text.
func ChildMain(args []string) int {
	out, err := childProbe(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		var errno unix.Errno
		if errors.As(err, &errno) && errno > 0 && int(errno) <= maxExitErrno {
			return errnoExitBase + int(errno)
		}
		return 1
	}
	fmt.Println(out)
	return 0
}

// Exit statuses errnoExitBase+1 .. errnoExitBase+maxExitErrno carry an
// errno from the child to the parent.
const (
	errnoExitBase = 64
	maxExitErrno  = 255 - errnoExitBase
)

func childProbe(args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("probe child: no probe named")
	}
	arg := func() (string, error) {
		if len(args) != 2 {
			return "", fmt.Errorf("probe child %s: want one argument, got %q", args[0], args[1:])
		}
		return args[1], nil
	}
	switch args[0] {
	case "ns":
		name, err := arg()
		if err != nil {
			return "", err
		}
		return childNamespace(name)
	case "mount-api":
		dir, err := arg()
		if err != nil {
			return "", err
		}
		return "ok", childMountAPI(dir)
	case "proc-subset":
		dir, err := arg()
		if err != nil {
			return "", err
		}
		return "ok", childProcSubset(dir)
	case "cgroup":
		return childCgroup()
	}
	return "", fmt.Errorf("probe child: unknown probe %q", args[0])
}

// childNamespace does in namespace name what the sandbox init first does
// with it, which needs the capabilities the user namespace should grant,
// then prints the namespace's id for the parent to compare with its own.
func childNamespace(name string) (string, error) {
	if name == "mnt" || name == "uts" || name == "net" {
		if err := guard(name); err != nil {
			return "", err
		}
	}
	switch name {
	case "mnt":
		if err := makeRootPrivate(); err != nil {
			return "", err
		}
	case "pid":
		if pid := os.Getpid(); pid != 1 {
			return "", fmt.Errorf("getpid: %d, want 1 in a new PID namespace", pid)
		}
	case "uts":
		if err := unix.Sethostname([]byte("nsbox-doctor")); err != nil {
			return "", fmt.Errorf("sethostname: %w", err)
		}
	case "net":
		if err := loopback.Up(); err != nil {
			return "", err
		}
		if err := listenProxy(); err != nil {
			return "", err
		}
	}
	p := "/proc/self/ns/" + name
	id, err := os.Readlink(p)
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", p, err)
	}
	return id, nil
}

// guard refuses to change namespace ns ("mnt", "uts", "net") unless it
// belongs to this process's own user namespace and that is not the
// host's. The probe creates both together; run by hand on the host,
// `nsbox hostcheck-probe ns uts` would otherwise rename the host.
func guard(ns string) error {
	if m, err := os.ReadFile("/proc/self/uid_map"); err != nil {
		return fmt.Errorf("probe child: read /proc/self/uid_map: %w", err)
	} else if strings.Join(strings.Fields(string(m)), " ") == "0 0 4294967295" {
		return errors.New("probe child: refusing to run in the host's user namespace (internal use only: nsbox doctor starts it)")
	}
	own, err := nsID("/proc/self/ns/user")
	if err != nil {
		return err
	}
	p := "/proc/self/ns/" + ns
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("probe child: %w", err)
	}
	defer f.Close()
	ufd, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return fmt.Errorf("probe child: ioctl(NS_GET_USERNS) %s: %w", p, err)
	}
	owner, err := nsID("/proc/self/fd/" + strconv.Itoa(ufd))
	unix.Close(ufd)
	if err != nil {
		return err
	}
	if owner != own {
		return fmt.Errorf("probe child: refusing to change %s, which this process's user namespace does not own", p)
	}
	return nil
}

// nsID identifies the namespace file at p by device and inode.
func nsID(p string) ([2]uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return [2]uint64{}, fmt.Errorf("probe child: stat %s: %w", p, err)
	}
	return [2]uint64{st.Dev, st.Ino}, nil
}

// makeRootPrivate stops mounts made here from propagating to the host
// (and is the init's first mount step).
func makeRootPrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount --make-rprivate /: %w", err)
	}
	return nil
}

// childMountAPI attaches the detached, read-only mount the parent passed
// at fd 3 on dir, exactly as the init attaches its binds, and checks that
// the attached mount is read-only.
func childMountAPI(dir string) error {
	if err := guard("mnt"); err != nil {
		return err
	}
	if err := makeRootPrivate(); err != nil {
		return err
	}
	if err := unix.MoveMount(3, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %s: %w", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("mount_setattr: %s is writable after MOUNT_ATTR_RDONLY", dir)
	}
	return nil
}

// childProcSubset mounts a procfs for the new PID namespace with
// subset=pid (Linux 5.8), which leaves out every non-process entry
// (meminfo, sys, sysrq-trigger, ...), and checks that it did.
func childProcSubset(dir string) error {
	if err := guard("mnt"); err != nil {
		return err
	}
	if err := makeRootPrivate(); err != nil {
		return err
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("proc", dir, "proc", flags, "subset=pid"); err != nil {
		return fmt.Errorf("mount proc on %s with subset=pid: %w", dir, err)
	}
	// This process is PID 1 of the new namespace: its directory must be
	// there, and non-process entries must not.
	if _, err := os.Stat(filepath.Join(dir, "1")); err != nil {
		return fmt.Errorf("procfs with subset=pid: %w", err)
	}
	for _, name := range []string{"meminfo", "sys"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("procfs with subset=pid still shows %s: the option was ignored", name)
		}
	}
	return nil
}

// childCgroup prints this process's path in the cgroup v2 hierarchy (the
// "0::" line of /proc/self/cgroup).
func childCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	return "", errors.New("/proc/self/cgroup: no cgroup v2 (0::) line")
}

// listenProxy makes the endpoint of network allowlist mode as the sandbox
// init does, a TCP socket listening on spec.ProxyAddr, and closes it.
func listenProxy() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket(AF_INET, SOCK_STREAM): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: spec.ProxyPort, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("bind %s: %w", spec.ProxyAddr, err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		return fmt.Errorf("listen %s: %w", spec.ProxyAddr, err)
	}
	return nil
}
