package hostcheck

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const mountAPIName = "mount API (open_tree/move_mount/mount_setattr)"

// mountAPIMinKernel is mount_setattr's; open_tree and move_mount came in 5.2.
const mountAPIMinKernel = "5.12"

// probeMountAPI does what a run does with a bind: the parent clones a
// temporary directory into a detached mount (open_tree), makes it
// read-only before anyone can see it (mount_setattr), and a child in new
// user and mount namespaces attaches it (move_mount) and finds it
// read-only. The mount lives only in the child's namespace.
func probeMountAPI(exe string) Check {
	c := Check{Name: mountAPIName, Group: Namespaces, MinKernel: mountAPIMinKernel}
	if err := mountAPIRoundTrip(exe); err != nil {
		c.Detail, c.Hint = err.Error(), mountAPIHint(err)
		return c
	}
	c.OK, c.Detail = true, "detached read-only mount attached in a new mount namespace"
	return c
}

func mountAPIRoundTrip(exe string) error {
	dir, err := os.MkdirTemp("", "nsbox-doctor-mount-")
	if err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	defer os.Remove(dir)
	f, err := detachedReadOnly(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = child{exe: exe, args: []string{"mount-api", dir}, flags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		files: []*os.File{f}}.run()
	return err
}

// detachedReadOnly is the supervisor's detachedBind for a read-only bind.
func detachedReadOnly(dir string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open_tree", Path: dir, Err: err}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "mount_setattr", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// mountAPIPresent is the cheap check for Require: each syscall is made
// so that it has no effect, and says whether the kernel has it:
//   - open_tree without OPEN_TREE_CLONE only opens a path (like O_PATH);
//   - mount_setattr with nothing to change returns 0 right after its
//     permission check, before it looks at the fd;
//   - move_mount from fd -1 to fd -1 fails with EBADF after its
//     permission check.
//
// The permission check is CAP_SYS_ADMIN over this mount namespace, so
// EPERM means this process may not mount (not root, or a container).
func mountAPIPresent() error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return &os.PathError{Op: "open_tree", Path: "/", Err: err}
	}
	unix.Close(fd)
	if err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{}); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	err = unix.MoveMount(-1, "", -1, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	if !errors.Is(err, unix.EBADF) {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// mountAPIHint explains a mount API failure by its errno.
func mountAPIHint(err error) string {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return "the kernel is older than 5.12: open_tree and move_mount need 5.2, mount_setattr 5.12; upgrade the kernel"
	case errors.Is(err, unix.EPERM):
		return "the mount syscalls were refused: nsbox run needs root (CAP_SYS_ADMIN) on the host; in Docker/Kubernetes " + containerAdvice
	}
	return "see the detail; in Docker/Kubernetes " + containerAdvice
}
