package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/netproxy"
	"github.com/nsbox/nsbox/sandbox/result"
)

// The network allowlist tests. Every byte stays on this machine: the
// "internet" is a set of servers these tests start on the host's
// 127.0.0.1 (outside the sandbox's network namespace), with a throwaway
// CA made here for HTTPS; a forbidden listener, a listener on another
// loopback address and a fake resolver count what reaches them, which
// must be nothing.

// netHost is the host side of one test.
type netHost struct {
	caFile string // the throwaway CA's certificate, PEM, readable by the program
	caPEM  string

	http, https *httptest.Server
	handshakes  atomic.Int64 // TLS handshakes the HTTPS server began
	requests    atomic.Int64 // requests both servers answered
	ended       chan string  // paths whose response the client cut short

	forbidden     net.Listener // 127.0.0.1, not in the allow list
	otherIP       net.Listener // 127.0.0.2, same port as nothing allowed
	forbiddenHits atomic.Int64
	resolver      *net.UDPConn // a fake DNS server on 127.0.0.1
	resolverHits  atomic.Int64
}

// newNetHost starts the servers; t.Cleanup stops them.
func newNetHost(t *testing.T) *netHost {
	t.Helper()
	h := &netHost{ended: make(chan string, 16)}
	caCert, caKey, caPEM := newCA(t)
	h.caPEM = caPEM
	h.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(h.caFile, []byte(caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		fmt.Fprintf(w, "hello from the host, host header %s", r.Host)
	})
	// /bytes?n=N: N bytes, in 64 KiB writes.
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	// /slow: 1 KiB every 20 ms for at most a minute; records a client
	// that went away.
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		buf := make([]byte, 1024)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if _, err := w.Write(buf); err != nil {
				h.ended <- r.URL.Path
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	})
	h.http = httptest.NewServer(mux)
	t.Cleanup(h.http.Close)
	h.https = httptest.NewUnstartedServer(mux)
	leaf := newLeaf(t, caCert, caKey)
	h.https.TLS = &tls.Config{
		Certificates: []tls.Certificate{leaf},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			h.handshakes.Add(1)
			return nil, nil
		},
	}
	// The proxy connects before it reads the ClientHello it then refuses:
	// the server sees a connection end with no handshake, not an error.
	h.https.Config.ErrorLog = log.New(io.Discard, "", 0)
	h.https.StartTLS()
	t.Cleanup(h.https.Close)

	h.forbidden = h.listen(t, "127.0.0.1:0")
	h.otherIP = h.listen(t, "127.0.0.2:0")
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	h.resolver = udp
	t.Cleanup(func() { udp.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			h.resolverHits.Add(1)
		}
	}()
	return h
}

// listen opens a listener that counts and closes what it accepts.
func (h *netHost) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.forbiddenHits.Add(1)
			c.Close()
		}
	}()
	return ln
}

// addr is a server's host:port.
func addr(s *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(s.URL, "https://"), "http://")
}

// nothingForbidden fails the test if a forbidden listener, the other
// address or the fake resolver received anything.
func (h *netHost) nothingForbidden(t *testing.T) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // a late packet would arrive by now
	if n := h.forbiddenHits.Load(); n != 0 {
		t.Errorf("the forbidden listeners accepted %d connection(s)", n)
	}
	if n := h.resolverHits.Load(); n != 0 {
		t.Errorf("the fake resolver received %d datagram(s)", n)
	}
}

// newCA makes a throwaway CA: its certificate, key and PEM.
func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nsbox test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// newLeaf makes the HTTPS server's certificate, for 127.0.0.1.
func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// allowPolicy writes a policy extending parent in allowlist mode that
// allows hosts; osOnly (imports "*", nothing denied) lets an attack
// reach the OS sandbox without the Python layer in front.
func allowPolicy(t *testing.T, parent string, osOnly bool, hosts []string, extra string) string {
	t.Helper()
	q := make([]string, len(hosts))
	for i, h := range hosts {
		q[i] = strconv.Quote(h)
	}
	s := fmt.Sprintf("extends = %q\n%s\n[network]\nmode = \"allowlist\"\nallow = [%s]\nmax_connections = 64\nmax_bytes = \"512MiB\"\n",
		parent, extra, strings.Join(q, ", "))
	if osOnly {
		s += "[allowlist]\nimports = [\"*\"]\ndeny_builtins = []\ndeny_events = []\nstrict_attributes = false\n"
	}
	if timeoutScale > 1 && !strings.Contains(extra, "[limits]") {
		// The parent's wall clock, scaled (scalePolicyTimeout scales
		// only a timeout the text itself sets).
		s += fmt.Sprintf("[limits]\ntimeout = \"%ds\"\n", int(30*timeoutScale))
	}
	if rootlessCorpus && !delegatedCgroup() {
		// As scalePolicyTimeout drops it from a built-in's text: no
		// cgroup can be delegated to the rootless user on this host.
		s += "[sandbox]\nrequire = [\"namespaces\", \"seccomp\", \"memfd_noexec\"]\n"
	}
	s = scalePolicyTimeout(t, parent, s)
	p := filepath.Join(t.TempDir(), "allow.toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// py quotes s as a Python string literal.
func py(s string) string { return strconv.Quote(s) }

// conn returns the result's connection to host:port, or fails.
func conn(t *testing.T, r *result.Result, hostport string) result.Connection {
	t.Helper()
	if r.Network == nil {
		t.Fatalf("no network section in the result")
	}
	for _, c := range r.Network.Connections {
		if net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) == hostport {
			return c
		}
	}
	t.Fatalf("no connection to %s in %+v", hostport, r.Network.Connections)
	return result.Connection{}
}

// hasViolation reports whether r has a network violation naming name.
func hasViolation(r *result.Result, name string) bool {
	return slices.ContainsFunc(r.Violations, func(v result.Violation) bool {
		return v.Kind == result.ViolationNetwork && v.Name == name
	})
}

// TestNetAllowStdlib: under allowlist mode the standard library's urllib
// reaches the allowed HTTP and HTTPS servers through the proxy with no
// code change (HTTP_PROXY, HTTPS_PROXY), certificate checked against the
// test's CA, and the result lists both connections with their bytes.
func TestNetAllowStdlib(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "default", false, []string{addr(h.http), addr(h.https)}, "[allowlist]\nimports_add = [\"ssl\"]\n")
	code := `
import ssl, urllib.request
ctx = ssl.create_default_context(cafile="/tmp/ca.pem")
print(urllib.request.urlopen("http://` + addr(h.http) + `/hello").read().decode())
print(urllib.request.urlopen("https://` + addr(h.https) + `/hello", context=ctx).read().decode())
`
	o := runPyLayer(t, policy, "open('/tmp/ca.pem', 'w').write("+py(h.caPEM)+")\n"+code)
	o.wantStatus(t, result.StatusOK)
	if n := strings.Count(o.res.Stdout, "hello from the host"); n != 2 {
		t.Fatalf("want both answers, got: %s\n%s", o.res.Stdout, o.res.Stderr)
	}
	if !strings.Contains(o.res.Stdout, "host header "+addr(h.http)) {
		t.Errorf("the HTTP server saw another Host header: %s", o.res.Stdout)
	}
	plain, tunnel := conn(t, o.res, addr(h.http)), conn(t, o.res, addr(h.https))
	if !plain.Allowed || plain.Method != result.ConnectHTTP || plain.Address != addr(h.http) || plain.BytesReceived == 0 || plain.BytesSent == 0 {
		t.Errorf("plain HTTP connection: %+v", plain)
	}
	if !tunnel.Allowed || tunnel.Method != result.ConnectTunnel || tunnel.Address != addr(h.https) || tunnel.BytesReceived == 0 {
		t.Errorf("HTTPS tunnel: %+v", tunnel)
	}
	if n := o.res.Network; n.Refused != 0 || n.BytesReceived < plain.BytesReceived+tunnel.BytesReceived || n.Proxy != "127.0.0.1:3128" {
		t.Errorf("network section: %+v", n)
	}
	if len(o.res.Violations) != 0 {
		t.Errorf("violations: %+v", o.res.Violations)
	}
	if h.handshakes.Load() != 1 || h.requests.Load() != 2 {
		t.Errorf("the servers saw %d handshake(s) and %d request(s), want 1 and 2", h.handshakes.Load(), h.requests.Load())
	}
	o.noLeftovers(t)
}

// TestNetAllowRefused: one program tries every way around the list, with
// the Python layer out of the way (the OS sandbox and the proxy must hold
// by themselves): another port, another address, a name not on the
// list, a CONNECT to the allowed HTTPS server whose TLS names another
// host, a raw socket to the host's listener, a UDP datagram to a fake
// resolver. Each fails; the proxy's refusals are violations of kind
// network naming the target; nothing reaches the forbidden listeners or
// the resolver, and the HTTPS server never sees the mismatched handshake.
func TestNetAllowRefused(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "default", true, []string{addr(h.http), addr(h.https)}, "")
	forbidden := h.forbidden.Addr().(*net.TCPAddr).Port
	other := h.otherIP.Addr().String()
	rport := h.resolver.LocalAddr().(*net.UDPAddr).Port
	code := fmt.Sprintf(`
import socket, ssl, urllib.request, urllib.error
def get(url):
    try:
        urllib.request.urlopen(url, timeout=10).read()
        return "OK"
    except urllib.error.HTTPError as e:
        return "HTTP %%d %%s" %% (e.code, e.read().decode().strip())
    except Exception as e:
        return "ERR " + type(e).__name__
print("port:", get("http://127.0.0.1:%d/"))
print("ip:", get("http://%s/"))
print("name:", get("http://not-on-the-list.example/"))

# CONNECT to the allowed HTTPS server, then TLS naming another host.
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n")
print("connect:", s.recv(200).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname="evil.example").do_handshake()
    print("sni: HANDSHAKE")
except Exception as e:
    print("sni: ERR", type(e).__name__)

# Around the proxy: TCP straight to the host's listener, UDP to the resolver.
try:
    socket.create_connection(("127.0.0.1", %d), timeout=5)
    print("raw: CONNECTED")
except Exception as e:
    print("raw: ERR", type(e).__name__, getattr(e, "errno", None))
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("127.0.0.1", %d))
    print("udp: SENT")
except Exception as e:
    print("udp: ERR", type(e).__name__, getattr(e, "errno", None))
`, forbidden, other, addr(h.https), addr(h.https), forbidden, rport)
	o := runPyLayer(t, policy, code)
	o.wantStatus(t, result.StatusOK)
	out := o.res.Stdout
	for _, want := range []string{
		fmt.Sprintf("port: HTTP 403 nsbox: policy %q does not allow 127.0.0.1:%d", policy, forbidden),
		"ip: HTTP 403", "name: HTTP 403", "not-on-the-list.example",
		"connect: HTTP/1.1 200", "sni: ERR",
		// The filter's proxy variant refuses the datagram socket (EPERM).
		"udp: ERR PermissionError 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the program's output:\n%s\nstderr: %s", want, out, o.res.Stderr)
		}
	}
	// The raw connect finds nothing in the namespace (ECONNREFUSED), or
	// Landlock's network rules refuse it first (EACCES, ABI 4).
	if !strings.Contains(out, "raw: ERR ConnectionRefusedError 111") && !strings.Contains(out, "raw: ERR PermissionError 13") {
		t.Errorf("the raw connect: %s", out)
	}
	for _, name := range []string{"127.0.0.1:" + strconv.Itoa(forbidden), other, "not-on-the-list.example:80", addr(h.https)} {
		if !hasViolation(o.res, name) {
			t.Errorf("no network violation for %s: %+v", name, o.res.Violations)
		}
	}
	sni := conn(t, o.res, addr(h.https))
	if sni.Allowed || !strings.Contains(sni.Reason, "evil.example") {
		t.Errorf("the mismatched tunnel: %+v", sni)
	}
	if n := o.res.Network.Refused; n != 4 {
		t.Errorf("refused %d, want 4: %+v", n, o.res.Network.Connections)
	}
	if n := h.handshakes.Load(); n != 0 {
		t.Errorf("the HTTPS server saw %d handshake(s) of the mismatched tunnel", n)
	}
	h.nothingForbidden(t)
	o.noLeftovers(t)
}

// TestNetAllowNetworkNone: --network none turns the policy's allowlist
// off for one run: no proxy, no proxy environment, no network section,
// and the allowed server is not reached.
func TestNetAllowNetworkNone(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "default", false, []string{addr(h.http)}, "")
	code := `
import os, urllib.request
print("proxy env:", os.environ.get("HTTP_PROXY"))
try:
    urllib.request.urlopen("http://` + addr(h.http) + `/hello", timeout=5)
    print("REACHED")
except Exception as e:
    print("ERR", type(e).__name__)
`
	o := runPyLayer(t, policy, code, "--network", "none")
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(o.res.Stdout, "proxy env: None") || !strings.Contains(o.res.Stdout, "ERR") {
		t.Errorf("with --network none: %s", o.res.Stdout)
	}
	if o.res.Network != nil {
		t.Errorf("network section with --network none: %+v", o.res.Network)
	}
	if h.requests.Load() != 0 {
		t.Errorf("the server answered %d request(s)", h.requests.Load())
	}
	// Nothing on the command line widens: --network allowlist is refused.
	o = runPyLayer(t, "default", "print(1)", "--network", "allowlist")
	o.wantStatus(t, result.StatusSandboxError)
	if o.res.Error == nil || !strings.Contains(o.res.Error.Message, "nothing widens it") {
		t.Errorf("--network allowlist: %+v", o.res.Error)
	}
}

// TestNetAllowLoad: 50 connections at once and a 100 MiB download
// through the proxy: every byte arrives, each connection is in the
// result, and the supervisor's peak memory stays within the proxy's
// documented bound (netproxy.MemoryBoundFor) plus the slack any run has
// (supervisorSlack): the relay holds a fixed buffer per connection, never
// the data. The peak is the nsbox process's own VmHWM, sampled until it
// exits (ru_maxrss would fold in the program's, 50 threads and all).
func TestNetAllowLoad(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "default", false, []string{addr(h.http)}, "[allowlist]\nimports_add = [\"ssl\"]\n")
	const conns, each, big = 50, 2 << 20, 100 << 20
	code := fmt.Sprintf(`
import threading, urllib.request
def fetch(n, out, i):
    got = 0
    with urllib.request.urlopen("http://%s/bytes?n=%%d" %% n, timeout=60) as r:
        while True:
            b = r.read(1 << 16)
            if not b:
                break
            got += len(b)
    out[i] = got
out = [0] * %d
threads = [threading.Thread(target=fetch, args=(%d, out, i)) for i in range(%d)]
for th in threads: th.start()
for th in threads: th.join()
print("concurrent", sum(out))
big = [0]
fetch(%d, big, 0)
print("big", big[0])
`, addr(h.http), conns, each, conns, big)
	var hwm atomic.Int64
	sampled := make(chan struct{})
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", policy, "-c", code}, whileRuns: func(p *os.Process) {
		go func() {
			defer close(sampled)
			for {
				kib := vmHWM(p.Pid)
				if kib == 0 {
					return
				}
				hwm.Store(kib)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}})
	<-sampled
	o.wantStatus(t, result.StatusOK)
	for _, want := range []string{fmt.Sprintf("concurrent %d", conns*each), fmt.Sprintf("big %d", big)} {
		if !strings.Contains(o.res.Stdout, want) {
			t.Fatalf("want %q: %s\n%s", want, o.res.Stdout, o.res.Stderr)
		}
	}
	if n := len(o.res.Network.Connections); n != conns+1 || o.res.Network.BytesReceived < conns*each+big {
		t.Errorf("%d connections, %d bytes received: %+v", n, o.res.Network.BytesReceived, o.res.Network)
	}
	kib := hwm.Load()
	if kib == 0 {
		t.Fatal("no VmHWM sampled from the nsbox process")
	}
	bound := supervisorSlack + netproxy.MemoryBoundFor(64)
	t.Logf("50 connections at once, then 100 MiB: nsbox peak RSS %.1f MiB (bound %.1f MiB)", float64(kib)/1024, float64(bound)/(1<<20))
	if kib<<10 > bound {
		t.Errorf("nsbox peak RSS %.1f MiB, want at most %.1f MiB", float64(kib)/1024, float64(bound)/(1<<20))
	}
	o.noLeftovers(t)
}

// TestNetAllowKilledMidDownload: a run of the service whose program is
// downloading when its wall clock ends: the upstream sees its connection
// closed at once, and the service, which lives on, holds no descriptor
// more than before the run (no proxy socket, listener or connection left
// behind). That no proxy goroutine is left is netproxy's own test.
func TestNetAllowKilledMidDownload(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "default", false, []string{addr(h.http)}, "[limits]\ntimeout = \"3s\"\n")
	// No pool: a sandbox it prepares meanwhile would hold descriptors.
	s := startServe(t, "", "--policies", policy, "--pool", "0")
	s.ready(t)
	code := `
import urllib.request
with urllib.request.urlopen("http://` + addr(h.http) + `/slow") as r:
    while r.read(1024):
        pass
`
	// One run first: what the service holds after a run, warm pools and
	// its audit log included, is the baseline.
	if st, r, b := s.run(t, map[string]any{"code": "print(1)", "policy": policy}); st != 200 || r.Status != result.StatusOK {
		t.Fatalf("first run: %d %s", st, b)
	}
	before := fdCount(t, s.cmd.Process.Pid)
	st, r, b := s.run(t, map[string]any{"code": code, "policy": policy})
	if st != 200 {
		t.Fatalf("POST /v1/runs: %d %s", st, b)
	}
	if r.Status != result.StatusTimeout {
		t.Fatalf("status %s (%s), want timeout", r.Status, r.Reason)
	}
	c := conn(t, r, addr(h.http))
	if c.BytesReceived == 0 || c.Reason == "" {
		t.Errorf("the download's record: %+v", c)
	}
	select {
	case <-h.ended:
	case <-time.After(5 * time.Second):
		t.Errorf("the upstream connection was not closed within 5 s of the run's end")
	}
	deadline := time.Now().Add(5 * time.Second)
	after := fdCount(t, s.cmd.Process.Pid)
	for after > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		after = fdCount(t, s.cmd.Process.Pid)
	}
	if after > before {
		t.Errorf("the service holds %d descriptors after the run, %d before", after, before)
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}

// fdCount is the number of open descriptors of process pid.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestNetAllowWeb: the web policy, extended with the test's servers:
// requests and httpx from the web root reach them through the proxy
// unchanged (HTTPS checked against the test's CA), and the Python layer
// refuses and reports, as violations of kind network with their line,
// the routes around the proxy: a raw connect, a name lookup, a datagram.
// Nothing reaches the forbidden listeners or the resolver.
func TestNetAllowWeb(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "web", false, []string{addr(h.http), addr(h.https)}, "")
	forbidden := h.forbidden.Addr().(*net.TCPAddr).Port
	rport := h.resolver.LocalAddr().(*net.UDPAddr).Port
	code := fmt.Sprintf(`
import socket, requests, httpx
open("/tmp/ca.pem", "w").write(%s)
print("requests https:", requests.get("https://%s/hello", verify="/tmp/ca.pem", timeout=10).text)
print("httpx https:", httpx.get("https://%s/hello", verify="/tmp/ca.pem", timeout=10).text)
print("requests http:", requests.get("http://%s/hello", timeout=10).status_code)
r = requests.get("http://127.0.0.1:%d/", timeout=10)
print("refused:", r.status_code, r.text.strip())
def attempt(name, f):
    try:
        f()
        print(name + ": DONE")
    except Exception as e:
        print(name + ": ERR", type(e).__name__)
attempt("raw", lambda: socket.create_connection(("127.0.0.1", %d), timeout=5))
attempt("lookup", lambda: socket.getaddrinfo("example.com", 443))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", %d)))
`, py(h.caPEM), addr(h.https), addr(h.https), addr(h.http), forbidden, forbidden, rport)
	o := runPyLayer(t, policy, code)
	o.wantStatus(t, result.StatusOK)
	out := o.res.Stdout
	for _, want := range []string{
		"requests https: hello from the host", "httpx https: hello from the host", "requests http: 200",
		"refused: 403 nsbox: policy", "raw: ERR PermissionError", "lookup: ERR PermissionError", "udp: ERR PermissionError",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the program's output:\n%s\nstderr: %s", want, out, o.res.Stderr)
		}
	}
	var lines []int
	for _, v := range o.res.Violations {
		if v.Kind == result.ViolationNetwork && v.Line > 0 {
			lines = append(lines, v.Line)
		}
	}
	if len(lines) < 3 {
		t.Errorf("want the Python layer's network violations with their lines (raw, lookup, udp): %+v", o.res.Violations)
	}
	if !hasViolation(o.res, "127.0.0.1:"+strconv.Itoa(forbidden)) {
		t.Errorf("no violation for the proxy's refusal: %+v", o.res.Violations)
	}
	if n := o.res.Network; n == nil || len(n.Connections) != 4 || n.Refused != 1 {
		t.Errorf("network section: %+v", o.res.Network)
	}
	h.nothingForbidden(t)
	o.noLeftovers(t)
}

// TestNetAllowSession: a session of the service in allowlist mode keeps
// its proxy across cells, and each cell's result lists the connections
// opened during that cell only, a refusal a violation of that cell. A
// one-shot run from the service's pool (its proxy started when the
// sandbox was warmed) has its connection too.
func TestNetAllowSession(t *testing.T) {
	needRoot(t)
	h := newNetHost(t)
	policy := allowPolicy(t, "default", false, []string{addr(h.http)}, "")
	s := startServe(t, "", "--policies", policy, "--pool", "1")
	s.ready(t)
	st, pooled, b := s.run(t, map[string]any{"policy": policy,
		"code": "import urllib.request\nprint(urllib.request.urlopen('http://" + addr(h.http) + "/hello').read().decode())"})
	if st != 200 || pooled.Status != result.StatusOK {
		t.Fatalf("pooled run: %d %s", st, b)
	}
	if c := conn(t, pooled, addr(h.http)); !c.Allowed {
		t.Errorf("pooled run's connection: %+v", c)
	}
	var created struct{ ID string }
	req := map[string]any{"policy": policy, "timeout_per_cell": 20, "idle_timeout": 120}
	if st, b := s.jsonDo(t, "POST", "/v1/sessions", req, &created); st != 201 || created.ID == "" {
		t.Fatalf("POST /v1/sessions: %d %s", st, b)
	}
	forbidden := h.forbidden.Addr().(*net.TCPAddr).Port
	r := s.cell(t, created.ID, "import urllib.request\nprint(urllib.request.urlopen('http://"+addr(h.http)+"/hello').read().decode())")
	if r.Status != result.StatusOK || !strings.Contains(r.Stdout, "hello from the host") {
		t.Fatalf("first cell: %s %q %q", r.Status, r.Stdout, r.Stderr)
	}
	if c := conn(t, r, addr(h.http)); !c.Allowed || len(r.Network.Connections) != 1 {
		t.Errorf("first cell's network: %+v", r.Network)
	}
	r = s.cell(t, created.ID, fmt.Sprintf("try:\n    urllib.request.urlopen('http://127.0.0.1:%d/')\nexcept Exception as e:\n    print(type(e).__name__)", forbidden))
	if r.Status != result.StatusOK || !strings.Contains(r.Stdout, "HTTPError") {
		t.Fatalf("second cell: %s %q %q", r.Status, r.Stdout, r.Stderr)
	}
	if n := r.Network; n == nil || len(n.Connections) != 1 || n.Connections[0].Allowed || n.Refused != 1 {
		t.Errorf("second cell's network, want its one refused connection: %+v", r.Network)
	}
	if !hasViolation(r, "127.0.0.1:"+strconv.Itoa(forbidden)) {
		t.Errorf("second cell's violations: %+v", r.Violations)
	}
	if st, b := s.do(t, "DELETE", "/v1/sessions/"+created.ID, nil); st/100 != 2 {
		t.Errorf("DELETE the session: %d %s", st, b)
	}
	h.nothingForbidden(t)
	s.stopAndWait(t)
	s.nothingLeft(t)
}
