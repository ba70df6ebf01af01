package tests

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestNoNetwork opens a listener on the host's 127.0.0.1 and has the
// program connect to it, from a run that may make TCP sockets: the connect
// fails inside, and the listener sees no connection.
func TestNoNetwork(t *testing.T) {
	needRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	code := `
import socket
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", ` + strconv.Itoa(port) + `))
    print("CONNECTED")
except OSError as e:
    print("FAILED", type(e).__name__)
# /proc/net/dev lists this network namespace's interfaces (if_nameindex
# would need a netlink socket, which seccomp denies).
ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print("IFACES", ifs)
`
	// With loopback sockets, so that the connect is tried at all: the
	// built-in profiles refuse AF_INET sockets otherwise
	// (TestSocketFamiliesRefused). What stops it here is the network
	// namespace.
	o := runPy(t, loopbackPolicy(t, ""), code)
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(o.res.Stdout, "FAILED") {
		t.Errorf("connect to the host listener from inside: %s", o.res.Stdout)
	}
	if !strings.Contains(o.res.Stdout, "IFACES ['lo']") {
		t.Errorf("want only loopback inside: %s", o.res.Stdout)
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Errorf("host listener accepted a connection from the sandbox")
	case <-time.After(200 * time.Millisecond):
	}
}
