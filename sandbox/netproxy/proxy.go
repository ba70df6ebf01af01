package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run's proxy: its policy's allowlist and limits.
type Config struct {
	// Policy is the policy's name, named in every refusal.
	Policy string
	// Allow is the policy's network.allow, parsed by ParseRule. Empty:
	// every target is refused.
	Allow []Rule
	// MaxConns bounds the connections open at once (at least 1); one more
	// is refused with 403 naming max_connections.
	MaxConns int
	// MaxBytes bounds the bytes relayed in the run, both directions of
	// every connection summed (at least 1). The connection whose bytes
	// cross it is cut at exactly MaxBytes; later connections are refused.
	MaxBytes int64
	// Resolve looks up an allowed name on the host. nil:
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a resolved address from the host. nil: a TCP
	// net.Dialer.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// DialTimeout bounds the resolution, and then all the dials of one
	// connection together. 0: DefaultDialTimeout.
	DialTimeout time.Duration
	// HeaderTimeout bounds the time the program has to send its request
	// head. 0: DefaultHeaderTimeout.
	HeaderTimeout time.Duration
}

// Defaults for the Config's timeouts.
const (
	DefaultDialTimeout   = 10 * time.Second
	DefaultHeaderTimeout = 10 * time.Second
)

// Connection is the record of one connection the program made to the
// proxy.
type Connection struct {
	// Host and Port are the target the program asked for ("" and 0 when
	// its request could not be read).
	Host string `json:"host"`
	Port int    `json:"port"`
	// Method is "CONNECT" (a tunnel), "HTTP" (plain forwarding of one
	// request) or "" when the request could not be read.
	Method string `json:"method"`
	// Address is the resolved ip:port the proxy connected to, "" when it
	// did not connect.
	Address string `json:"address"`
	// Allowed: the target passed every check and bytes were relayed.
	// false: the proxy refused the connection or cut it for a policy
	// reason (Reason says which).
	Allowed bool `json:"allowed"`
	// Reason says why the connection was refused or ended abnormally ("run
	// ended" when Close found it open); "" for a clean allowed connection.
	Reason string `json:"reason,omitempty"`
	// BytesSent is the payload relayed from the program to the upstream
	// (for plain HTTP, with the request head as rewritten), BytesReceived
	// from the upstream to the program; neither counts the proxy's own
	// responses (200, 403, 502).
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
	// StartedMS is when the proxy accepted the connection, from Serve;
	// DurationMS its duration (so far, when in progress).
	StartedMS  int64 `json:"started_ms"`
	DurationMS int64 `json:"duration_ms"`
}

// Bounds on what the program can make the proxy hold (see the package doc).
const (
	// MaxRecords is the number of connections recorded one by one; later
	// ones are counted by Omitted.
	MaxRecords = 1024
	// relayBufBytes is each direction's relay buffer.
	relayBufBytes = 32 << 10
	// helloMax is the most of a ClientHello read: one full TLS record.
	helloMax = 5 + 16<<10
	// tlsParseBytes allows for crypto/tls's own copies of the ClientHello
	// it parses (its record buffer, the handshake message, the parsed
	// fields), each no larger than the bytes it was given.
	tlsParseBytes = 4 * helloMax
	// stackBytes allows for one goroutine's stack.
	stackBytes = 64 << 10
	// connBytes is one connection's bound: head buffer, two relay
	// buffers, the ClientHello's parse, two goroutines.
	connBytes = MaxHeadBytes + 2*relayBufBytes + tlsParseBytes + 2*stackBytes
	// refusalSlots connections beyond the limits are read (to name their
	// target) before their 403; beyond those, refused without reading.
	refusalSlots = 4
	refusalBytes = MaxHeadBytes + stackBytes
	// recordBytes bounds one record: its host is a checked name (at most
	// 253 bytes), its reason cut to maxReason.
	recordBytes = 1 << 10
	maxReason   = 512
)

var (
	headPool  = sync.Pool{New: func() any { b := make([]byte, MaxHeadBytes); return &b }}
	relayPool = sync.Pool{New: func() any { b := make([]byte, relayBufBytes); return &b }}
)

// Proxy is one run's proxy, serving its listener until Close.
type Proxy struct {
	cfg    Config
	ln     net.Listener
	epoch  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	left   atomic.Int64 // bytes the run may still relay
	// self is the host's own addresses when Serve started: a name never
	// reaches them (a public name pointed at this host's public address
	// would reach its services).
	self map[netip.Addr]bool

	mu       sync.Mutex
	closed   bool
	records  []*record
	omitted  int
	active   int // connections holding one of MaxConns
	refusing int // refusal slots in use
	open     map[net.Conn]struct{}

	closeOnce sync.Once
	final     []Connection
}

// Serve checks cfg and serves ln until Close. ln is the proxy's: Close
// closes it.
func Serve(ln net.Listener, cfg Config) (*Proxy, error) {
	if ln == nil {
		return nil, errors.New("netproxy: no listener")
	}
	if cfg.Policy == "" {
		return nil, errors.New("netproxy: config names no policy")
	}
	if cfg.MaxConns < 1 {
		return nil, fmt.Errorf("netproxy: policy %q: max_connections %d: must be at least 1", cfg.Policy, cfg.MaxConns)
	}
	if cfg.MaxBytes < 1 {
		return nil, fmt.Errorf("netproxy: policy %q: max_bytes %d: must be at least 1", cfg.Policy, cfg.MaxBytes)
	}
	if cfg.DialTimeout < 0 || cfg.HeaderTimeout < 0 {
		return nil, fmt.Errorf("netproxy: policy %q: negative timeout", cfg.Policy)
	}
	for i, r := range cfg.Allow {
		if parsed, err := ParseRule(r.String()); err != nil || parsed != r {
			return nil, fmt.Errorf("netproxy: policy %q: allow[%d] %q is not a rule from ParseRule: %v", cfg.Policy, i, r.String(), err)
		}
	}
	cfg.Allow = slices.Clone(cfg.Allow)
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.HeaderTimeout == 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Dial == nil {
		cfg.Dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr.String())
		}
	}
	self, err := hostAddrs()
	if err != nil {
		return nil, fmt.Errorf("netproxy: policy %q: %w", cfg.Policy, err)
	}
	p := &Proxy{cfg: cfg, ln: ln, epoch: time.Now(), open: map[net.Conn]struct{}{}, self: self}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.left.Store(cfg.MaxBytes)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// MemoryBound is the bound on the memory the program can make the proxy
// hold, in bytes (the package doc gives the formula).
func (p *Proxy) MemoryBound() int64 {
	return int64(p.cfg.MaxConns)*connBytes + refusalSlots*refusalBytes + MaxRecords*recordBytes
}

// Connections is a snapshot of the records, in accept order; connections in
// progress have their counts so far.
func (p *Proxy) Connections() []Connection {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]Connection, len(p.records))
	for i, r := range p.records {
		out[i] = r.c
		out[i].BytesSent, out[i].BytesReceived = r.sent.Load(), r.recv.Load()
		end := now
		if r.done {
			end = r.end
		}
		out[i].DurationMS = end.Sub(r.start).Milliseconds()
	}
	return out
}

// Omitted is the number of connections beyond MaxRecords, not recorded one
// by one.
func (p *Proxy) Omitted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.omitted
}

// Close stops the proxy: it closes the listener and every connection, to
// the program and upstream, waits for every goroutine of the proxy, and
// returns the final records (those open until now with Reason "run ended").
// Calling it again returns the same records.
func (p *Proxy) Close() []Connection {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		for _, r := range p.records {
			if !r.done {
				setReasonLocked(r, reasonRunEnded)
			}
		}
		conns := make([]net.Conn, 0, len(p.open))
		for c := range p.open {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		p.cancel()
		_ = p.ln.Close() // its error (already closed) changes nothing: Accept ends either way
		for _, c := range conns {
			_ = c.Close() // the relay's reads and writes end with the close; their errors are recorded there
		}
		p.wg.Wait()
		p.final = p.Connections()
	})
	return slices.Clone(p.final)
}

const reasonRunEnded = "run ended"

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
				return
			}
			// EMFILE and the like: wait and try again, as a server must
			// (the program cannot stop the proxy by exhausting fds).
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		p.admit(c)
	}
}

// admit records a new connection and serves it, or refuses it when a
// limit is reached.
func (p *Proxy) admit(c net.Conn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.Close() // never served: nothing to record
		return
	}
	r := p.newRecordLocked()
	var refusal string
	switch {
	case p.left.Load() <= 0:
		refusal = fmt.Sprintf("max_bytes (%d) reached", p.cfg.MaxBytes)
	case p.active >= p.cfg.MaxConns:
		refusal = fmt.Sprintf("max_connections (%d) reached", p.cfg.MaxConns)
	}
	switch {
	case refusal == "":
		p.active++
		p.open[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c, r)
	case p.refusing < refusalSlots:
		setReasonLocked(r, refusal)
		p.refusing++
		p.open[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.refuseLimited(c, r, refusal)
	default:
		setReasonLocked(r, refusal)
		p.mu.Unlock()
		// Every refusal slot is busy: answer without reading the request.
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(refusalResponse(403, p.refusalBody("this connection", refusal))) // best effort: the record holds the refusal
		_ = c.Close()
		p.finish(r)
	}
}

// track registers an upstream connection so Close closes it; false (and
// the connection closed) when the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close() // opened as the run ended: never used
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	_ = c.Close() // may be closed already by the relay or Close
}

// reserve takes up to n bytes from the run's budget and returns how many
// it took.
func (p *Proxy) reserve(n int) int {
	for {
		left := p.left.Load()
		if left <= 0 {
			return 0
		}
		take := min(int64(n), left)
		if p.left.CompareAndSwap(left, left-take) {
			return int(take)
		}
	}
}

var errMaxBytes = errors.New("max_bytes reached")

// send writes b to dst within the run's byte budget and counts what was
// written in n. When the budget ends inside b, it writes exactly up to the
// budget and returns errMaxBytes.
func (p *Proxy) send(dst net.Conn, b []byte, n *atomic.Int64) error {
	if len(b) == 0 {
		return nil
	}
	k := p.reserve(len(b))
	if k > 0 {
		w, err := dst.Write(b[:k])
		n.Add(int64(w))
		if w < k {
			p.left.Add(int64(k - w)) // not written: back to the budget
		}
		if err != nil {
			return err
		}
	}
	if k < len(b) {
		return errMaxBytes
	}
	return nil
}
