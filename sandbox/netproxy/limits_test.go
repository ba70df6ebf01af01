package netproxy

import (
	"bufio"
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
	// Close has waited for every goroutine's last deferred call; one may
	// still be returning from it.
	if !waitFor(time.Second, func() bool { return len(proxyGoroutines()) == 0 }) {
		t.Fatalf("proxy goroutines after Close:\n%s", strings.Join(proxyGoroutines(), "\n\n"))
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
