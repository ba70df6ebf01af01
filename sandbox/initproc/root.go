package initproc

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pivotRoot makes newRoot the root and detaches the old one, so no host
// path is reachable by name afterwards. pivot_root(".", ".") stacks the old
// root under the new one at "/", and the lazy unmount removes it (the
// trick runc uses: no directory for the old root is needed in the new one).
func pivotRoot() error {
	oldRoot, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: "/", Err: err}
	}
	defer unix.Close(oldRoot)
	if err := unix.Chdir(newRoot); err != nil {
		return &os.PathError{Op: "chdir", Path: newRoot, Err: err}
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root(%s): %w", newRoot, err)
	}
	// The old root is now stacked on "/"; make sure nothing below it can
	// propagate before detaching it.
	if err := unix.Fchdir(oldRoot); err != nil {
		return fmt.Errorf("fchdir(old root): %w", err)
	}
	if err := unix.Mount("", ".", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make old root rslave: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("umount2(old root, MNT_DETACH): %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return &os.PathError{Op: "chdir", Path: "/", Err: err}
	}
	return nil
}

// attachRoot attaches the root filesystem's detached mount (read-only,
// nosuid, nodev: set by the supervisor before anyone could see it) at
// newRoot, and checks those flags.
func attachRoot(fd int) error {
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, newRoot, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount fd " + strconv.Itoa(fd), Path: newRoot, Err: err}
	}
	return checkFlags(newRoot, unix.ST_RDONLY|unix.ST_NOSUID|unix.ST_NODEV)
}

// checkRootReadOnly verifies, after pivot_root, that "/" is read-only.
func checkRootReadOnly() error {
	return checkFlags("/", unix.ST_RDONLY|unix.ST_NOSUID|unix.ST_NODEV)
}

// checkFlags fails unless the mount at p has every flag in want.
func checkFlags(p string, want int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: p, Err: err}
	}
	if st.Flags&want != want {
		return fmt.Errorf("mount at %s has flags %#x, want %#x set", p, st.Flags, want)
	}
	return nil
}
