package service

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/service/launch"
)

// DefaultSocket is where the service listens unless told otherwise.
const DefaultSocket = launch.DefaultSocket

// SocketGroup is the group given the socket, when it exists: its members
// may use the service without being root.
const SocketGroup = "nsbox"

// Address is where the service listens: a Unix socket's path, or a TCP
// host and port.
type Address struct {
	Network string // "unix" or "tcp"
	Addr    string // the socket's path, or HOST:PORT
}

// ParseAddress reads --listen: unix:PATH or tcp:HOST:PORT.
func ParseAddress(s string) (Address, error) {
	network, addr, ok := strings.Cut(s, ":")
	switch {
	case !ok || addr == "":
		return Address{}, fmt.Errorf("listen address %q: want unix:PATH or tcp:HOST:PORT", s)
	case network == "unix":
		if !filepath.IsAbs(addr) {
			return Address{}, fmt.Errorf("listen address %q: the socket's path must be absolute", s)
		}
		return Address{"unix", filepath.Clean(addr)}, nil
	case network == "tcp":
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return Address{}, fmt.Errorf("listen address %q: %w", s, err)
		}
		return Address{"tcp", addr}, nil
	}
	return Address{}, fmt.Errorf("listen address %q: want unix:PATH or tcp:HOST:PORT", s)
}

// Loopback reports whether a TCP address is reachable from this host
// only: a loopback IP or "localhost". An empty host is every interface.
func (a Address) Loopback() bool {
	host, _, _ := net.SplitHostPort(a.Addr)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (a Address) String() string { return a.Network + ":" + a.Addr }

// Listen opens the listener of a. A Unix socket's directory is created
// (0755) if missing; a socket left by a service that died is removed
// (one that still answers is another service's: refused); the socket is
// created with mode 0600 and then given mode 0660 and the group
// SocketGroup when that group exists, so no one else can connect even for
// an instant. The listener removes the socket when closed.
func Listen(a Address) (net.Listener, error) {
	if a.Network == "tcp" {
		ln, err := net.Listen("tcp", a.Addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		return ln, nil
	}
	path := a.Addr
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create the socket's directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	// The umask is the process's: this runs at start-up, before the
	// service does anything else that creates files.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a, err)
	}
	if err := shareSocket(path); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStale removes the socket at path when nothing answers on it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("socket %s: %w", path, err)
	case fi.Mode().Type() != os.ModeSocket:
		return fmt.Errorf("socket %s: something else is there (%s); remove it or choose another --listen", path, fi.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("socket %s: another service answers on it", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the stale socket %s: %w", path, err)
	}
	return nil
}

// shareSocket gives the socket mode 0660 and the group SocketGroup, when
// it exists; otherwise it stays root's alone (0600).
func shareSocket(path string) error {
	g, err := user.LookupGroup(SocketGroup)
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return nil
		}
		return fmt.Errorf("look up group %s: %w", SocketGroup, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return fmt.Errorf("group %s: gid %q: %w", SocketGroup, g.Gid, err)
	}
	if err := os.Lchown(path, -1, gid); err != nil {
		return fmt.Errorf("chown %s to group %s: %w", path, SocketGroup, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// ReadToken reads the bearer token from path: its first line, at least
// 16 bytes. The file must be a regular file that neither its group nor
// others can read or write: a token anyone on the host can read guards
// nothing.
func ReadToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s: not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("token file %s: mode %04o lets others read or change it; chmod 600 it", path, fi.Mode().Perm())
	}
	buf := make([]byte, 4097)
	n, err := f.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) < 16 || n > 4096 {
		return nil, fmt.Errorf("token file %s: want one line of 16 to 4096 bytes (e.g. from `openssl rand -hex 32`)", path)
	}
	return line, nil
}
