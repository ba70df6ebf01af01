package initproc

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// proxyBacklog is how many connections to the proxy may wait for the
// supervisor's accept; the proxy itself bounds how many it serves.
const proxyBacklog = 64

// sendProxyListener makes the proxy endpoint of network allowlist mode: a
// TCP socket listening on spec.ProxyAddr in the run's network namespace,
// sent to the supervisor on the sync socket (spec.Listener with
// SCM_RIGHTS), which serves it from the host. Connections the program
// makes to it stay in its namespace; only the supervisor's own dials
// leave the host, to the hosts the policy allows. The init keeps no copy.
func sendProxyListener(syncFD int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket(AF_INET, SOCK_STREAM): %w", err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: spec.ProxyPort, Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("bind %s: %w", spec.ProxyAddr, err)
	}
	if err := unix.Listen(fd, proxyBacklog); err != nil {
		return fmt.Errorf("listen %s: %w", spec.ProxyAddr, err)
	}
	if err := unix.Sendmsg(syncFD, spec.Listener, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("send the %s listener on sync fd %d: %w", spec.ProxyAddr, syncFD, err)
	}
	return nil
}
