package netproxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	up := startUpstream(t, ca.tlsEcho)
	port := strconv.Itoa(up.port)
	for _, tc := range []struct {
		target, sni string
		ok          bool
	}{
		{"allowed.test:" + port, "evil.test", false},
		{"allowed.test:" + port, "ALLOWED.test", true},
		{"127.0.0.1:" + port, "allowed.test", false},
		{"127.0.0.1:" + port, "", true},
	} {
		t.Run(tc.target+"/"+tc.sni, func(t *testing.T) {
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
	p, _, addr := startProxy(t, Config{HeaderTimeout: 5 * time.Second}, target)
	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := c.br.ReadString('\n')
	if err != nil || line != "220 ready\n" || time.Since(start) > time.Second {
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
	if d := time.Since(start); d > time.Second {
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

func TestOversizedHead(t *testing.T) {
	for name, head := range map[string]string{
		"bytes":   "CONNECT allowed.test:443 HTTP/1.1\r\nX-Big: " + strings.Repeat("a", MaxHeadBytes) + "\r\n\r\n",
		"headers": "CONNECT allowed.test:443 HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", MaxHeaderLines+1) + "\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			p, _, addr := startProxy(t, Config{}, "allowed.test:443")
			c := dialProxy(t, addr)
			go io.WriteString(c, head) // the proxy stops reading at its bound
			r, err := readResponse(c.br)
			if err != nil || r.status != 431 {
				t.Fatalf("answer %+v, %v", r, err)
			}
			if rec := only(t, p.Close()); rec.Allowed || rec.Method != "" || !strings.Contains(rec.Reason, "header") && !strings.Contains(rec.Reason, "head larger") {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

func TestSlowClient(t *testing.T) {
	p, _, addr := startProxy(t, Config{HeaderTimeout: 200 * time.Millisecond}, "allowed.test:443")
	c := dialProxy(t, addr)
	io.WriteString(c, "CONNECT allowed.te")
	start := time.Now()
	r, err := readResponse(c.br)
	if err != nil || r.status != 408 {
		t.Fatalf("answer %+v, %v", r, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("answered after %v", d)
	}
	if rec := only(t, p.Close()); rec.Allowed || !strings.Contains(rec.Reason, "no complete request head") {
		t.Errorf("record %+v", rec)
	}
}

func TestMaxConnections(t *testing.T) {
	up := startUpstream(t, echo)
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{MaxConns: 2}, target)
	var open []*client
	for range 2 {
		c := dialProxy(t, addr)
		if r := c.connect(t, target); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		open = append(open, c)
	}
	c := dialProxy(t, addr)
	r := c.connect(t, target)
	if r.status != 403 || !strings.Contains(r.body, "max_connections (2)") || !strings.Contains(r.body, target) {
		t.Fatalf("third connection: %d %q", r.status, r.body)
	}
	// One ends; a new one is served again.
	open[0].Close()
	ok := waitFor(5*time.Second, func() bool {
		c := dialProxy(t, addr)
		r := c.connect(t, target)
		c.Close()
		return r.status == 200
	})
	if !ok {
		t.Fatal("no connection served after one of max_connections closed")
	}
	recs := p.Close()
	if recs[2].Allowed || !strings.Contains(recs[2].Reason, "max_connections") || recs[2].Host != "allowed.test" {
		t.Errorf("record %+v", recs[2])
	}
}

func TestMaxBytes(t *testing.T) {
	up := startUpstream(t, source)
	target := "allowed.test:" + strconv.Itoa(up.port)
	const limit = 100000
	p, _, addr := startProxy(t, Config{MaxBytes: limit}, target)
	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	req := "1000000\n"
	io.WriteString(c, req)
	got, _ := io.Copy(io.Discard, c) // ends with the cut (EOF or reset)
	if got != limit-int64(len(req)) {
		t.Errorf("received %d bytes, want exactly %d", got, limit-len(req))
	}
	recs := p.Connections()
	if recs[0].Allowed || !strings.Contains(recs[0].Reason, "max_bytes (100000)") || recs[0].BytesSent+recs[0].BytesReceived != limit {
		t.Errorf("record %+v", recs[0])
	}
	c2 := dialProxy(t, addr)
	if r := c2.connect(t, target); r.status != 403 || !strings.Contains(r.body, "max_bytes") {
		t.Errorf("after the limit: %d %q", r.status, r.body)
	}
}

// download fetches n bytes through a tunnel to the source upstream.
func download(addr, target string, n int64, buf []byte) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	c := &client{Conn: conn, br: bufio.NewReader(conn)}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
	r, err := readResponse(c.br)
	if err != nil || r.status != 200 {
		return fmt.Errorf("CONNECT: %d %v", r.status, err)
	}
	fmt.Fprintf(c, "%d\n", n)
	got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, buf)
	if err != nil || got != n {
		return fmt.Errorf("downloaded %d of %d bytes: %v", got, n, err)
	}
	return nil
}

func TestConcurrentDownloads(t *testing.T) {
	up := startUpstream(t, source)
	target := "allowed.test:" + strconv.Itoa(up.port)
	const conns, size = 50, 2 << 20
	p, _, addr := startProxy(t, Config{MaxConns: conns}, target)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	bufs := make([][]byte, conns)
	for i := range bufs {
		bufs[i] = make([]byte, 32<<10)
	}
	w := watchHeap()
	start := time.Now()
	for i := range conns {
		wg.Go(func() {
			if err := download(addr, target, size, bufs[i]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	peak, alloc := w.stop()
	t.Logf("%d × %d bytes in %v; heap in use: peak %d bytes over the base, %d allocated; bound %d", conns, size, time.Since(start), peak, alloc, p.MemoryBound())
	if peak > p.MemoryBound()+heapMargin {
		t.Errorf("heap grew by %d bytes, more than the bound %d + %d", peak, p.MemoryBound(), heapMargin)
	}
	settled(t)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs := p.Close()
	if len(recs) != conns {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if !r.Allowed || r.BytesReceived != size || r.Reason != "" {
			t.Errorf("record %+v", r)
		}
	}
}

// TestBigDownload: a 100 MiB download holds no more heap than the bound,
// and what it allocates does not grow with the bytes relayed. The heap in
// use is sampled during the transfer; the margin allows for the test's own
// goroutines and the runtime's noise.
func TestBigDownload(t *testing.T) {
	up := startUpstream(t, source)
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{MaxConns: 1}, target)
	const size = 100 << 20
	buf := make([]byte, 32<<10)
	w := watchHeap()
	start := time.Now()
	err := download(addr, target, size, buf)
	peak, alloc := w.stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 MiB in %v; heap in use: peak %d bytes over the base, %d allocated; bound %d", time.Since(start), peak, alloc, p.MemoryBound())
	if peak > p.MemoryBound()+heapMargin || alloc > p.MemoryBound()+heapMargin {
		t.Errorf("heap grew by %d bytes (%d allocated), more than the bound %d + %d", peak, alloc, p.MemoryBound(), heapMargin)
	}
	settled(t)
	if rec := only(t, p.Close()); rec.BytesReceived != size || rec.Reason != "" {
		t.Errorf("record %+v", rec)
	}
}

const heapMargin = 4 << 20

// heapWatch samples the heap in use until stop.
type heapWatch struct {
	base  runtime.MemStats
	peak  uint64
	done  chan struct{}
	ended chan struct{}
}

func watchHeap() *heapWatch {
	runtime.GC()
	w := &heapWatch{done: make(chan struct{}), ended: make(chan struct{})}
	runtime.ReadMemStats(&w.base)
	go func() {
		defer close(w.ended)
		var m runtime.MemStats
		for {
			select {
			case <-w.done:
				return
			case <-time.After(2 * time.Millisecond):
				runtime.ReadMemStats(&m)
				w.peak = max(w.peak, m.HeapInuse)
			}
		}
	}()
	return w
}

// stop returns the peak heap in use over the base and the bytes allocated
// since the start.
func (w *heapWatch) stop() (peak, alloc int64) {
	close(w.done)
	<-w.ended
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(max(w.peak, m.HeapInuse)) - int64(w.base.HeapInuse), int64(m.TotalAlloc - w.base.TotalAlloc)
}

// TestCloseMidDownload: Close during a download leaves no goroutine of the
// proxy, no fd, no connection.
func TestCloseMidDownload(t *testing.T) {
	up := startUpstream(t, source)
	target := "allowed.test:" + strconv.Itoa(up.port)
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rule, _ := ParseRule(target)
	res := newResolver()
	p, err := Serve(ln, Config{Policy: "test", Allow: []Rule{rule}, MaxConns: 8, MaxBytes: 1 << 40, Resolve: res.resolve, Dial: testDial})
	if err != nil {
		t.Fatal(err)
	}
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n-1\n", target) // an endless download
		if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	// One more, still sending its head.
	half, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	clients = append(clients, half)
	io.WriteString(half, "CONNECT allo")
	waitFor(time.Second, func() bool { return len(p.Connections()) == 4 })
	for i, r := range p.Connections()[:3] {
		if !r.Allowed || r.Reason != "" || r.BytesReceived < 1<<20 || r.DurationMS < 0 {
			t.Errorf("record %d in progress: %+v", i, r)
		}
	}

	recs := p.Close()
	if g := proxyGoroutines(); len(g) != 0 {
		t.Fatalf("proxy goroutines after Close:\n%s", strings.Join(g, "\n\n"))
	}
	for i, r := range recs {
		if r.Reason != reasonRunEnded || i < 3 && (!r.Allowed || r.BytesReceived < 1<<20) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if len(recs) != 4 {
		t.Errorf("%d records", len(recs))
	}
	// The program's ends see the close.
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && !isReset(err) {
			t.Errorf("client after Close: %v", err)
		}
		c.Close()
	}
	up.stop()
	if !waitFor(5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines && openFDs(t) <= fds }) {
		t.Errorf("goroutines %d (before %d), fds %d (before %d)", runtime.NumGoroutine(), goroutines, openFDs(t), fds)
	}
	if again := p.Close(); len(again) != len(recs) {
		t.Errorf("second Close: %d records", len(again))
	}
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

func TestServeChecksConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, cfg := range []Config{
		{MaxConns: 1, MaxBytes: 1},
		{Policy: "p", MaxBytes: 1},
		{Policy: "p", MaxConns: 1},
		{Policy: "p", MaxConns: 1, MaxBytes: 1, Allow: []Rule{{Host: "a.test"}}},
		{Policy: "p", MaxConns: 1, MaxBytes: 1, Allow: []Rule{{Host: "*.a.test", Port: 443}}},
		{Policy: "p", MaxConns: 1, MaxBytes: 1, DialTimeout: -1},
	} {
		if _, err := Serve(ln, cfg); err == nil {
			t.Errorf("Serve(%+v) accepted", cfg)
		}
	}
	if _, err := Serve(nil, Config{Policy: "p", MaxConns: 1, MaxBytes: 1}); err == nil {
		t.Error("Serve(nil) accepted")
	}
}

func TestMemoryBound(t *testing.T) {
	p, _, _ := startProxy(t, Config{MaxConns: 10})
	want := int64(10*connBytes + refusalSlots*refusalBytes + MaxRecords*recordBytes)
	if p.MemoryBound() != want {
		t.Errorf("MemoryBound %d, want %d", p.MemoryBound(), want)
	}
}

// TestRefusalSlots: beyond max_connections, a few connections are read for
// their target; when those slots are busy the next is answered at once,
// unread.
func TestRefusalSlots(t *testing.T) {
	up := startUpstream(t, echo)
	target := "allowed.test:" + strconv.Itoa(up.port)
	p, _, addr := startProxy(t, Config{MaxConns: 1}, target)
	c := dialProxy(t, addr)
	if r := c.connect(t, target); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	for range refusalSlots {
		dialProxy(t, addr) // sends nothing: holds a refusal slot
	}
	if !waitFor(5*time.Second, func() bool { return len(p.Connections()) == 1+refusalSlots }) {
		t.Fatal("connections not accepted")
	}
	last := dialProxy(t, addr)
	r, err := readResponse(last.br) // without sending anything
	if err != nil || r.status != 403 || !strings.Contains(r.body, "max_connections (1)") {
		t.Fatalf("answer %+v, %v", r, err)
	}
	recs := p.Close()
	if len(recs) != 2+refusalSlots {
		t.Fatalf("%d records", len(recs))
	}
	for _, rec := range recs[1:] {
		if rec.Allowed || !strings.Contains(rec.Reason, "max_connections") {
			t.Errorf("record %+v", rec)
		}
	}
}

// TestRecordsBounded: beyond MaxRecords, connections are counted, not
// recorded.
func TestRecordsBounded(t *testing.T) {
	p, _, addr := startProxy(t, Config{})
	for range MaxRecords + 10 {
		c := dialProxy(t, addr)
		if r := c.connect(t, "other.test:443"); r.status != 403 {
			t.Fatalf("status %d", r.status)
		}
		c.Close()
	}
	settled(t)
	if n, o := len(p.Close()), p.Omitted(); n != MaxRecords || o != 10 {
		t.Errorf("%d records, %d omitted", n, o)
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
