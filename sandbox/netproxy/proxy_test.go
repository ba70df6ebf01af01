package netproxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// only returns the one record, failing otherwise.
func only(t *testing.T, recs []Connection) Connection {
	t.Helper()
	if len(recs) != 1 {
		t.Fatalf("want 1 connection record, got %d: %+v", len(recs), recs)
	}
	return recs[0]
}

func TestConnectTLS(t *testing.T) {
	ca := newTestCA(t)
	up := startUpstream(t, ca.tlsEcho)
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{}, target)

	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("CONNECT %s: status %d, body %q", target, r.status, r.body)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: ca.pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the proxy: %v", err)
	}
	msg := strings.Repeat("ping ", 1000)
	if _, err := io.WriteString(tc, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(tc, got); err != nil || string(got) != msg {
		t.Fatalf("echo through the tunnel: %v (%d bytes)", err, len(got))
	}
	tc.Close()
	up.stop() // every upstream byte counted
	settled(t)
	rec := only(t, p.Close())
	if !rec.Allowed || rec.Method != "CONNECT" || rec.Host != "allowed.test" || rec.Port != up.port ||
		rec.Address != testAddr.String()+":"+strconv.Itoa(up.port) {
		t.Errorf("record %+v", rec)
	}
	if rec.BytesSent != up.recv.Load() || rec.BytesReceived != up.sent.Load() || rec.BytesSent < int64(len(msg)) {
		t.Errorf("record counts %d sent, %d received; upstream received %d, sent %d", rec.BytesSent, rec.BytesReceived, up.recv.Load(), up.sent.Load())
	}
	if rec.Reason != "" {
		t.Errorf("reason %q for a clean tunnel", rec.Reason)
	}
}

func TestPlainHTTP(t *testing.T) {
	up := startUpstream(t, httpResponder)
	port := strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{}, "allowed.test:"+port)

	c := dialProxy(t, addr)
	req := "POST http://ALLOWED.test:" + port + "/path?q=1 HTTP/1.1\r\n" +
		"Host: evil.test\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n" +
		"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Test: 1\r\nContent-Length: 4\r\n\r\nbody" +
		// A second request on the same connection, for another site: it
		// goes to the first upstream as bytes, never to other.test.
		"GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.Conn.(*net.TCPConn).CloseWrite()
	r, err := readResponse(c.br)
	if err != nil || r.status != 200 || r.body != "hello from upstream\n" {
		t.Fatalf("response %+v, %v", r, err)
	}
	up.stop()
	settled(t)
	heads := up.kept()
	want := "POST /path?q=1 HTTP/1.1\r\nHost: allowed.test:" + port + "\r\nX-Test: 1\r\nContent-Length: 4\r\nConnection: close\r\n\r\n"
	if len(heads) != 2 || heads[0] != want || heads[1] != "bodyGET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n" {
		t.Fatalf("upstream received %q\nwant head %q", heads, want)
	}
	rec := only(t, p.Close())
	if !rec.Allowed || rec.Method != "HTTP" || rec.Host != "allowed.test" || rec.BytesSent != up.recv.Load() || rec.BytesReceived != up.sent.Load() {
		t.Errorf("record %+v; upstream received %d, sent %d", rec, up.recv.Load(), up.sent.Load())
	}
	if up.conns.Load() != 1 {
		t.Errorf("upstream saw %d connections", up.conns.Load())
	}
}

// TestRefusals: each target is refused with its status, the body names the
// policy and the target, and the record says why; names off the list are
// never resolved, and the upstream never sees a connection.
func TestRefusals(t *testing.T) {
	up := startUpstream(t, echo)
	port := strconv.Itoa(up.port)
	other := strconv.Itoa(up.port + 1)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := strconv.Itoa(dead.Addr().(*net.TCPAddr).Port)
	dead.Close() // nothing listens there now
	rules := []string{"allowed.test:" + port, "127.0.0.1:" + port, "*.example.com:" + port,
		"rebind.test:" + port, "nxdomain.test:" + port, "closed.test:" + deadPort, "mixed.test:" + port}
	for _, tc := range []struct {
		request    string // a CONNECT target, or a whole request line
		status     int
		reason     string
		notAsked   string // a name the resolver must not see
		wantTarget string // the record's host:port
	}{
		{"other.test:" + port, 403, "not in network.allow", "other.test", "other.test:" + port},
		{"allowed.test:" + other, 403, "not in network.allow", "allowed.test", "allowed.test:" + other},
		{"127.0.0.2:" + port, 403, "not in network.allow", "", "127.0.0.2:" + port},
		{"[::1]:" + port, 403, "not in network.allow", "", "[::1]:" + port},
		{"example.com:" + port, 403, "not in network.allow", "example.com", "example.com:" + port},
		{"xexample.com:" + port, 403, "not in network.allow", "xexample.com", "xexample.com:" + port},
		{"rebind.test:" + port, 403, "10.0.0.1 (private), 127.0.0.1 (loopback), 192.168.1.1 (private)", "", "rebind.test:" + port},
		{"nxdomain.test:" + port, 502, "cannot resolve nxdomain.test", "", "nxdomain.test:" + port},
		{"closed.test:" + deadPort, 502, "cannot connect to closed.test:" + deadPort, "", "closed.test:" + deadPort},
		{"allowed.test", 400, "has no port", "allowed.test", ""},
		{"GET / HTTP/1.1", 400, "not a proxy request", "", ""},
		{"GET https://allowed.test/ HTTP/1.1", 400, "use CONNECT", "allowed.test", ""},
		{"GET http://user@allowed.test:" + port + "/ HTTP/1.1", 400, "bad authority", "allowed.test", ""},
		{"CONNECT bücher.example.com:" + port + " HTTP/1.1", 400, "request target has a byte", "", ""},
		{"GET http://allowed.test:" + port + "/ HTTP/2.0", 400, "not HTTP/1.1", "allowed.test", ""},
	} {
		t.Run(tc.request, func(t *testing.T) {
			p, res, addr := startProxy(t, Config{}, rules...)
			c := dialProxy(t, addr)
			var r response
			if strings.Contains(tc.request, " ") {
				fmt.Fprintf(c, "%s\r\nHost: x\r\n\r\n", tc.request)
				var err error
				if r, err = readResponse(c.br); err != nil {
					t.Fatal(err)
				}
			} else {
				r = c.connect(t, tc.request)
			}
			if r.status != tc.status || !strings.Contains(r.body, tc.reason) || !strings.Contains(r.body, `policy "test"`) ||
				r.headers["connection"] != "close" || !strings.HasPrefix(r.headers["content-type"], "text/plain") {
				t.Errorf("answer %d %v %q; want %d naming %q", r.status, r.headers, r.body, tc.status, tc.reason)
			}
			if tc.wantTarget != "" && !strings.Contains(r.body, tc.wantTarget) {
				t.Errorf("body %q does not name %s", r.body, tc.wantTarget)
			}
			if tc.notAsked != "" && res.askedFor(tc.notAsked) {
				t.Errorf("%s was resolved", tc.notAsked)
			}
			rec := only(t, p.Close())
			if rec.Allowed || !strings.Contains(rec.Reason, tc.reason) || rec.Address != "" {
				t.Errorf("record %+v", rec)
			}
			if tc.wantTarget != "" && net.JoinHostPort(rec.Host, strconv.Itoa(rec.Port)) != strings.Trim(tc.wantTarget, "[]") &&
				"["+rec.Host+"]:"+strconv.Itoa(rec.Port) != tc.wantTarget {
				t.Errorf("record names %s:%d, want %s", rec.Host, rec.Port, tc.wantTarget)
			}
		})
	}
	if n := up.conns.Load(); n != 0 {
		t.Errorf("the upstream saw %d connections from refused requests", n)
	}
}

// TestAllowedTargets: wildcards at any depth, IP rules, a name whose
// internal addresses are skipped for its public one.
func TestAllowedTargets(t *testing.T) {
	up := startUpstream(t, echo)
	port := strconv.Itoa(up.port)
	for _, target := range []string{"a.b.example.com:" + port, "X.Example.COM.:" + port, "127.0.0.1:" + port, "mixed.test:" + port, "fallback.test:" + port} {
		t.Run(target, func(t *testing.T) {
			p, _, addr := startProxy(t, Config{}, "*.example.com:"+port, "127.0.0.1:"+port, "mixed.test:"+port, "fallback.test:"+port)
			c := dialProxy(t, addr)
			if r := c.connect(t, target); r.status != 200 {
				t.Fatalf("status %d %q", r.status, r.body)
			}
			io.WriteString(c, "not TLS\n")
			line, err := c.br.ReadString('\n')
			if err != nil || line != "not TLS\n" {
				t.Fatalf("echo %q, %v", line, err)
			}
			rec := only(t, p.Connections())
			if !rec.Allowed || rec.Reason != "" || !strings.HasSuffix(rec.Address, ":"+port) || strings.HasPrefix(rec.Address, "127.") != strings.HasPrefix(target, "127.") {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

func TestSNI(t *testing.T) {
	ca := newTestCA(t)
	for _, tc := range []struct {
		host, sni string
		ok        bool
	}{
		{"allowed.test", "evil.test", false},
		{"allowed.test", "ALLOWED.test", true},
		{"127.0.0.1", "allowed.test", false},
		{"127.0.0.1", "", true},
	} {
		t.Run(tc.host+"/"+tc.sni, func(t *testing.T) {
			up := startUpstream(t, ca.tlsEcho)
			port := strconv.Itoa(up.port)
			tc := struct {
				target, sni string
				ok          bool
			}{tc.host + ":" + port, tc.sni, tc.ok}
			p, _, addr := startProxy(t, Config{}, "allowed.test:"+port, "127.0.0.1:"+port)
			before := up.recv.Load()
			c := dialProxy(t, addr)
			if r := c.connect(t, tc.target); r.status != 200 {
				t.Fatalf("status %d %q", r.status, r.body)
			}
			// Certificates are not the point here: the proxy never sees them.
			cl := tls.Client(c, &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true})
			cl.SetDeadline(time.Now().Add(5 * time.Second))
			err := cl.Handshake()
			if tc.ok != (err == nil) {
				t.Fatalf("handshake: %v, want success %v", err, tc.ok)
			}
			cl.Close()
			rec := only(t, p.Close())
			if tc.ok {
				if !rec.Allowed {
					t.Errorf("record %+v", rec)
				}
				return
			}
			if rec.Allowed || !strings.Contains(rec.Reason, tc.sni) || !strings.Contains(rec.Reason, strings.Split(tc.target, ":")[0]) {
				t.Errorf("record %+v", rec)
			}
			if rec.BytesSent != 0 || up.recv.Load() != before {
				t.Errorf("the upstream received %d bytes of a refused ClientHello", up.recv.Load()-before)
			}
		})
	}
}

// TestBadHello: a TLS-looking start that is no ClientHello is refused, and
// the upstream receives nothing.
func TestBadHello(t *testing.T) {
	up := startUpstream(t, echo)
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{}, target)
	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	c.Write(append([]byte{0x16, 0x03, 0x01, 0x00, 0x40}, make([]byte, 0x40)...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after a bad ClientHello", n)
	}
	rec := only(t, p.Close())
	if rec.Allowed || !strings.Contains(rec.Reason, "ClientHello not readable") || up.recv.Load() != 0 {
		t.Errorf("record %+v, upstream received %d", rec, up.recv.Load())
	}
}

// TestServerSpeaksFirst: the upstream's bytes reach the program before it
// sends anything; its first bytes are still checked when they come, later;
// a tunnel still silent when the run ends does not hold Close.
func TestServerSpeaksFirst(t *testing.T) {
	up := startUpstream(t, func(_ *upstream, c net.Conn) {
		io.WriteString(c, "220 ready\n")
		io.Copy(io.Discard, c)
	})
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{HeaderTimeout: time.Minute}, target)
	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := c.br.ReadString('\n')
	if err != nil || line != "220 ready\n" || time.Since(start) > 20*time.Second {
		t.Fatalf("banner %q after %v, %v", line, time.Since(start), err)
	}
	time.Sleep(50 * time.Millisecond)
	cl := tls.Client(c, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
	cl.SetDeadline(time.Now().Add(5 * time.Second))
	if err := cl.Handshake(); err == nil {
		t.Fatal("a ClientHello for another name, sent after the banner, passed")
	}
	// A second tunnel still waiting for its first bytes when the run ends.
	c2 := dialProxy(t, addr)
	if r := c2.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	start = time.Now()
	recs := p.Close()
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Close took %v", d)
	}
	if len(recs) != 2 || recs[0].Allowed || !strings.Contains(recs[0].Reason, "evil.test") || recs[0].BytesReceived != int64(len("220 ready\n")) ||
		recs[1].Reason != reasonRunEnded || !recs[1].Allowed {
		t.Errorf("records %+v", recs)
	}
	if up.recv.Load() != 0 {
		t.Errorf("the upstream received %d bytes", up.recv.Load())
	}
}

func TestHalfClose(t *testing.T) {
	up := startUpstream(t, func(_ *upstream, c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "got %d\n", n)
	})
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{}, target)
	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	io.WriteString(c, strings.Repeat("x", 100000))
	c.Conn.(*net.TCPConn).CloseWrite()
	out, err := io.ReadAll(c)
	if err != nil || string(out) != "got 100000\n" {
		t.Fatalf("after half-close: %q, %v", out, err)
	}
	settled(t)
	if rec := only(t, p.Close()); !rec.Allowed || rec.Reason != "" || rec.BytesSent != 100000 || rec.BytesReceived != int64(len(out)) {
		t.Errorf("record %+v", rec)
	}
}

// clientHello is a ClientHello record crypto/tls sends for sni.
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		defer a.Close()
		tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
	}()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// TestPipelinedHello: a ClientHello sent with the CONNECT head, before the
// 200, is checked and replayed byte for byte.
func TestPipelinedHello(t *testing.T) {
	for sni, ok := range map[string]bool{"allowed.test": true, "evil.test": false} {
		t.Run(sni, func(t *testing.T) {
			hello := clientHello(t, sni)
			up := startUpstream(t, func(u *upstream, c net.Conn) {
				b := make([]byte, len(hello))
				if n, _ := io.ReadFull(c, b); n > 0 {
					u.keep(string(b[:n]))
				}
			})
			target := "allowed.test:" + strconv.Itoa(up.port)
			p, _, addr := startProxy(t, Config{}, target)
			c := dialProxy(t, addr)
			c.Write(append([]byte("CONNECT "+target+" HTTP/1.1\r\n\r\n"), hello...))
			if r, err := readResponse(c.br); err != nil || r.status != 200 {
				t.Fatalf("answer %+v, %v", r, err)
			}
			io.Copy(io.Discard, c) // until the upstream or the proxy closes
			c.Close()
			up.stop()
			settled(t)
			rec := only(t, p.Close())
			kept := up.kept()
			if ok {
				if !rec.Allowed || len(kept) != 1 || kept[0] != string(hello) || rec.BytesSent != int64(len(hello)) {
					t.Errorf("record %+v; upstream received %d bytes, want the %d-byte hello", rec, len(strings.Join(kept, "")), len(hello))
				}
				return
			}
			if rec.Allowed || !strings.Contains(rec.Reason, "evil.test") || len(kept) != 0 || up.recv.Load() != 0 {
				t.Errorf("record %+v; upstream received %d bytes", rec, up.recv.Load())
			}
		})
	}
}
