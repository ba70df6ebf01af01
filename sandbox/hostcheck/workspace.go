package hostcheck

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const workspaceTmpfsName = "workspace tmpfs (fsopen/fsmount)"

// workspaceTmpfsMinKernel is when tmpfs took its options through fsconfig
// (fsopen and fsmount came in 5.2).
const workspaceTmpfsMinKernel = "5.4"

// probeWorkspaceTmpfs does what the supervisor does for a fresh
// /workspace: a tmpfs bounded in bytes and inodes, made as a detached
// mount that no namespace sees (fsopen, fsconfig, fsmount), and checks
// that the kernel reports those bounds. The mount goes with its
// descriptor.
func probeWorkspaceTmpfs() Check {
	c := Check{Name: workspaceTmpfsName, Group: BoundedWorkspace, MinKernel: workspaceTmpfsMinKernel}
	const size, inodes = 1 << 20, 16
	if err := boundedTmpfsRoundTrip(size, inodes); err != nil {
		c.Detail, c.Hint = err.Error(), workspaceTmpfsHint
		return c
	}
	c.OK, c.Detail = true, "detached tmpfs bounded in bytes and inodes"
	return c
}

func boundedTmpfsRoundTrip(size, inodes int64) error {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	for _, o := range [][2]string{{"size", fmt.Sprint(size)}, {"nr_inodes", fmt.Sprint(inodes)}} {
		if err := unix.FsconfigSetString(fs, o[0], o[1]); err != nil {
			return fmt.Errorf("fsconfig tmpfs %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("fsconfig tmpfs create: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("fsmount tmpfs: %w", err)
	}
	defer unix.Close(mnt)
	var st unix.Statfs_t
	if err := unix.Fstatfs(mnt, &st); err != nil {
		return fmt.Errorf("fstatfs tmpfs: %w", err)
	}
	if got := int64(st.Blocks) * st.Bsize; got != size || int64(st.Files) != inodes {
		return fmt.Errorf("a tmpfs of %d bytes and %d inodes reports %d bytes and %d inodes", size, inodes, got, st.Files)
	}
	return nil
}

// workspaceTmpfsPresent is the cheap check for Require: fsopen of a tmpfs
// context makes no superblock and has no effect once closed.
func workspaceTmpfsPresent() Check {
	c := Check{Name: workspaceTmpfsName, Group: BoundedWorkspace, MinKernel: workspaceTmpfsMinKernel, OK: true, Detail: "present"}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		c.OK, c.Detail, c.Hint = false, (&os.SyscallError{Syscall: "fsopen tmpfs", Err: err}).Error(), workspaceTmpfsHint
		return c
	}
	unix.Close(fs)
	return c
}

const workspaceTmpfsHint = "nsbox run needs root (CAP_SYS_ADMIN) and a kernel with tmpfs (CONFIG_TMPFS) and the mount API (Linux 5.4); in Docker/Kubernetes " + containerAdvice
