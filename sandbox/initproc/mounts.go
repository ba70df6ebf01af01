package initproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// newRoot is where the new root is assembled: the root filesystem is
// attached over /tmp in the init's own (private) mount namespace, as
// bubblewrap does with its tmpfs; the host's /tmp is not touched and is
// gone after pivot_root.
const newRoot = "/tmp"

// procFD names a descriptor through /proc, so mount(2) follows the magic
// link to the object the fd was opened on (the /dev node binds).
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// in returns p (an absolute path inside the sandbox) under the new root.
func in(p string) string { return filepath.Join(newRoot, p) }

// mount wraps mount(2) with an error that names the operation and target.
func mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return &os.PathError{Op: "mount " + fstype + " " + source, Path: target, Err: err}
	}
	return nil
}

// lockedFlags returns the mount flags of the mount that holds fd which a
// remount inside a user namespace must keep: the kernel locks them on
// mounts inherited from a more privileged namespace and refuses (EPERM) a
// remount that would clear them.
func lockedFlags(fd int) (uintptr, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return 0, fmt.Errorf("fstatfs fd %d: %w", fd, err)
	}
	var flags uintptr
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_RDONLY, unix.MS_RDONLY},
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	return flags, nil
}

// makeMountPoint creates an empty directory or file at p (and its parents).
func makeMountPoint(p string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", filepath.Dir(p), err)
	}
	if dir {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create mount point %s: %w", p, err)
	}
	return f.Close()
}

// attachBind attaches the detached mount fd (prepared by the supervisor
// with its final flags: nosuid, nodev, and read-only, or noexec when
// writable) at dest inside the new root.
// The flags are checked after attaching: a writable bind where the spec
// says read-only (or an executable one where it says writable) stops the
// run.
func attachBind(fd int, dest string, dir, writable bool) error {
	target := in(dest)
	if err := makeMountPoint(target, dir); err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount fd " + strconv.Itoa(fd), Path: target, Err: err}
	}
	want := int64(unix.ST_NOSUID | unix.ST_NODEV)
	if writable {
		want |= unix.ST_NOEXEC
	} else {
		want |= unix.ST_RDONLY
	}
	return checkFlags(target, want)
}

// mountTmpfs mounts a tmpfs of the given size and mode at dest (inside).
func mountTmpfs(dest string, size int64, mode os.FileMode, flags uintptr) error {
	target := in(dest)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", dest, err)
	}
	data := fmt.Sprintf("size=%d,mode=%o,nr_inodes=%d", size, mode, inodesFor(size))
	return mount("tmpfs", target, "tmpfs", flags, data)
}

// inodesFor bounds a tmpfs's inode count too, so a file-creation loop hits
// ENOSPC instead of filling kernel memory with empty inodes.
func inodesFor(size int64) int64 {
	n := size / 1024 // one inode per KiB of space
	if n < 1024 {
		n = 1024
	}
	return n
}
