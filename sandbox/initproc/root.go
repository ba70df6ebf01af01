package initproc

import (
	"fmt"
	"os"

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

// remountRootReadOnly turns the root tmpfs read-only now that every mount
// point, symlink and /etc file is in place.
func remountRootReadOnly() error {
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	if err := unix.Mount("", "/", "", flags, ""); err != nil {
		return &os.PathError{Op: "remount read-only", Path: "/", Err: err}
	}
	return nil
}

// loopbackUp brings up "lo" in the new network namespace: programs may talk
// to themselves over 127.0.0.1, and there is no other interface.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket(AF_INET): %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("ifreq lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("ioctl(SIOCGIFFLAGS, lo): %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("ioctl(SIOCSIFFLAGS, lo up): %w", err)
	}
	return nil
}
