// Package loopback brings up "lo" in the caller's network namespace. The
// sandbox init does it so programs can talk to themselves over 127.0.0.1
// in a namespace with no other interface, and nsbox doctor's probe child
// does exactly the same to show it works on this host.
package loopback

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Up sets IFF_UP on "lo".
func Up() error {
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
