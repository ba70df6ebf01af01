package netproxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests' names resolve (through Config.Resolve) to testAddr, a
// documentation address a name rule may reach; the tests' Dial connects
// testAddr:port to 127.0.0.1:port, where the test's upstreams listen. Every
// byte stays on this machine.
var (
	testAddr = netip.MustParseAddr("203.0.113.7")
	// unreachableAddr is an address the tests' Dial fails to reach.
	unreachableAddr = netip.MustParseAddr("198.51.100.1")
	loopback4       = netip.MustParseAddr("127.0.0.1")
)

// resolver is the tests' DNS: a fixed table, and a log of the names asked.
type resolver struct {
	mu    sync.Mutex
	table map[string][]netip.Addr
	asked []string
}

func newResolver() *resolver {
	return &resolver{table: map[string][]netip.Addr{
		"allowed.test":    {testAddr},
		"other.test":      {testAddr},
		"a.b.example.com": {testAddr},
		"x.example.com":   {testAddr},
		"example.com":     {testAddr},
		"rebind.test":     {netip.MustParseAddr("10.0.0.1"), loopback4, netip.MustParseAddr("::ffff:192.168.1.1")},
		"mixed.test":      {loopback4, testAddr},
		"closed.test":     {testAddr},
		"fallback.test":   {unreachableAddr, testAddr},
	}}
}

func (r *resolver) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if a, ok := r.table[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", host)
}

func (r *resolver) askedFor(host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.asked {
		if h == host {
			return true
		}
	}
	return false
}

func testDial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	if ap.Addr() == unreachableAddr {
		return nil, fmt.Errorf("dial %s: network is unreachable", ap)
	}
	if ap.Addr() == testAddr {
		ap = netip.AddrPortFrom(loopback4, ap.Port())
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", ap.String())
}

// startProxy serves a proxy on 127.0.0.1 with the tests' resolver and
// dialer; cfg's Policy, Resolve, Dial and zero limits are filled in.
func startProxy(t *testing.T, cfg Config, rules ...string) (*Proxy, *resolver, string) {
	t.Helper()
	res := newResolver()
	if cfg.Policy == "" {
		cfg.Policy = "test"
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 16
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 40
	}
	if cfg.Resolve == nil {
		cfg.Resolve = res.resolve
	}
	if cfg.Dial == nil {
		cfg.Dial = testDial
	}
	for _, s := range rules {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Allow = append(cfg.Allow, r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Serve(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, res, ln.Addr().String()
}

// upstream is a server on 127.0.0.1 the proxy connects to. It counts the
// connections and the bytes it receives and sends, on the wire.
type upstream struct {
	ln         net.Listener
	port       int
	conns      atomic.Int64
	recv, sent atomic.Int64
	mu         sync.Mutex
	heads      []string // what handlers chose to keep
	wg         sync.WaitGroup
}

type countingConn struct {
	net.Conn
	u *upstream
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.u.recv.Add(int64(n))
	return n, err
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.u.sent.Add(int64(n))
	return n, err
}

func (c countingConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

func startUpstream(t *testing.T, handle func(u *upstream, c net.Conn)) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				handle(u, countingConn{c, u})
			}()
		}
	}()
	t.Cleanup(u.stop)
	return u
}

// stop closes the listener and waits for every handler.
func (u *upstream) stop() {
	u.ln.Close()
	u.wg.Wait()
}

func (u *upstream) keep(s string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.heads = append(u.heads, s)
}

func (u *upstream) kept() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.heads...)
}

// echo copies back what it reads until the end of stream.
func echo(_ *upstream, c net.Conn) { _, _ = io.Copy(c, c) }

// source reads a line "N\n" and sends N bytes (N < 0: forever), then
// closes.
func source(_ *upstream, c net.Conn) {
	line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	if err != nil {
		return
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for i := range buf {
		buf[i] = byte(i)
	}
	for n != 0 {
		k := int64(len(buf))
		if n > 0 && n < k {
			k = n
		}
		if _, err := c.Write(buf[:k]); err != nil {
			return
		}
		if n > 0 {
			n -= k
		}
	}
}

// httpResponder reads one request head, keeps it, and answers 200 with a
// body naming the bytes of the head.
func httpResponder(u *upstream, c net.Conn) {
	br := bufio.NewReader(c)
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			break
		}
		if line == "\r\n" {
			break
		}
	}
	u.keep(head.String())
	// Keep what follows the head too (a body, further requests), until
	// the program's end of stream.
	rest, _ := io.ReadAll(br)
	if len(rest) > 0 {
		u.keep(string(rest))
	}
	body := "hello from upstream\n"
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// response is a proxy's (or upstream's) HTTP answer, parsed by hand.
type response struct {
	status  int
	headers map[string]string
	body    string
}

// readResponse reads a response head and, given a Content-Length, its
// body.
func readResponse(br *bufio.Reader) (response, error) {
	r := response{headers: map[string]string{}}
	line, err := br.ReadString('\n')
	if err != nil {
		return r, fmt.Errorf("status line: %w", err)
	}
	f := strings.SplitN(strings.TrimRight(line, "\r\n"), " ", 3)
	if len(f) < 2 {
		return r, fmt.Errorf("bad status line %q", line)
	}
	if r.status, err = strconv.Atoi(f[1]); err != nil {
		return r, fmt.Errorf("bad status line %q", line)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return r, fmt.Errorf("header: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		r.headers[strings.ToLower(k)] = strings.TrimSpace(v)
	}
	if cl, ok := r.headers["content-length"]; ok {
		n, err := strconv.Atoi(cl)
		if err != nil {
			return r, err
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return r, fmt.Errorf("body: %w", err)
		}
		r.body = string(b)
	}
	return r, nil
}

// client is a connection to the proxy with a reader over it.
type client struct {
	net.Conn
	br *bufio.Reader
}

func (c *client) Read(b []byte) (int, error) { return c.br.Read(b) }

func dialProxy(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, br: bufio.NewReader(c)}
}

// connect sends CONNECT target and reads the proxy's answer.
func (c *client) connect(t *testing.T, target string) response {
	t.Helper()
	if _, err := fmt.Fprintf(c.Conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: test\r\n\r\n", target, target); err != nil {
		t.Fatal(err)
	}
	r, err := readResponse(c.br)
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return r
}

// testCA is a throwaway CA and a server certificate it signed for
// allowed.test and 127.0.0.1.
type testCA struct {
	pool *x509.CertPool
	cert tls.Certificate
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netproxy test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "allowed.test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames: []string{"allowed.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testCA{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// tlsEcho answers TLS (any server name) and echoes.
func (ca *testCA) tlsEcho(u *upstream, c net.Conn) {
	s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{ca.cert}})
	if err := s.Handshake(); err != nil {
		return
	}
	_, _ = io.Copy(s, s)
}

// proxyGoroutines lists the goroutines running the proxy's code.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	var out []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "netproxy.(*Proxy)") {
			out = append(out, g)
		}
	}
	return out
}

// settled waits until no connection of the proxy is still being served
// (their records are final).
func settled(t *testing.T) {
	t.Helper()
	ok := waitFor(5*time.Second, func() bool {
		for _, g := range proxyGoroutines() {
			if strings.Contains(g, "netproxy.(*Proxy).serve") {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatal("connections still served")
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}
