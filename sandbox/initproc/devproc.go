package initproc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// devNodes are the only device nodes the sandbox gets. They are bind
// mounts of the host's nodes: an unprivileged user namespace cannot mknod.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// devLinks are the conventional /dev symlinks into the fresh /proc.
var devLinks = [][2]string{
	{"/dev/fd", "/proc/self/fd"},
	{"/dev/stdin", "/proc/self/fd/0"},
	{"/dev/stdout", "/proc/self/fd/1"},
	{"/dev/stderr", "/proc/self/fd/2"},
}

// maskedPaths hide kernel interfaces that leak host information or expose
// dangerous knobs (runc's default list): files get /dev/null over them,
// directories an empty read-only tmpfs.
var maskedPaths = []string{
	"/proc/acpi",
	"/proc/asound",
	"/proc/interrupts",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/proc/sched_debug",
	"/proc/scsi",
}

// readonlyPaths stay visible but read-only (runc's default list): writing
// to /proc/sys or /proc/sysrq-trigger would reach the host kernel.
var readonlyPaths = []string{
	"/proc/bus",
	"/proc/fs",
	"/proc/irq",
	"/proc/sys",
	"/proc/sysrq-trigger",
}

// setupDev builds a minimal /dev: a small tmpfs holding bind-mounted nodes,
// the fd symlinks and a size-limited /dev/shm; the tmpfs itself ends up
// read-only so nothing can be added to /dev.
func setupDev(shmSize int64) error {
	if err := mountTmpfs("/dev", 64<<10, 0o755, unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return err
	}
	for _, name := range devNodes {
		if err := bindDevNode("/dev/" + name); err != nil {
			return err
		}
	}
	for _, l := range devLinks {
		if err := os.Symlink(l[1], in(l[0])); err != nil {
			return fmt.Errorf("symlink %s -> %s: %w", l[0], l[1], err)
		}
	}
	if err := mountTmpfs(spec.Shm, shmSize, 0o1777, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return err
	}
	return mount("", in("/dev"), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// bindDevNode binds the host's node at p (e.g. /dev/null) to the same path
// in the new root. The nodes must stay usable, so no MS_NODEV here.
func bindDevNode(p string) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("%s is not a character device", p)
	}
	target := in(p)
	if err := makeMountPoint(target, false); err != nil {
		return err
	}
	if err := mount(procFD(fd), target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	keep, err := lockedFlags(fd)
	if err != nil {
		return err
	}
	// Read-only still allows writing to the device (a write goes to the
	// driver, not the filesystem); it stops chmod and friends.
	return mount("", target, "", keep|unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// setupProc mounts a fresh procfs for the new PID namespace and covers
// runc's masked and read-only paths. Without a fresh /proc the program
// would see host processes; without the covers it could read kernel
// memory maps or poke /proc/sys.
func setupProc() error {
	if err := os.MkdirAll(in("/proc"), 0o755); err != nil {
		return fmt.Errorf("mkdir /proc: %w", err)
	}
	// Read-only: nothing under /proc needs writing by a Python program,
	// and this closes /proc/self/{attr,oom_score_adj,...} and friends.
	if err := mount("proc", in("/proc"), "proc", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for _, p := range maskedPaths {
		if err := maskPath(p); err != nil {
			return err
		}
	}
	for _, p := range readonlyPaths {
		if err := readonlyPath(p); err != nil {
			return err
		}
	}
	return nil
}

func maskPath(p string) error {
	fi, err := os.Stat(in(p))
	if errors.Is(err, os.ErrNotExist) {
		return nil // not on this kernel: nothing to hide
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	if fi.IsDir() {
		return mount("tmpfs", in(p), "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,nr_inodes=1")
	}
	if err := mount(in("/dev/null"), in(p), "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return mount("", in(p), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

func readonlyPath(p string) error {
	if _, err := os.Stat(in(p)); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	if err := mount(in(p), in(p), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return mount("", in(p), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}
