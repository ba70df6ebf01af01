package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// serve handles one admitted connection: read the request head, check the
// target, resolve and connect on the host, then tunnel (CONNECT) or forward
// one request (plain HTTP).
func (p *Proxy) serve(c net.Conn, r *record) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		p.active--
		delete(p.open, c)
		p.mu.Unlock()
		_ = c.Close() // may be closed already by the relay or Close
		p.finish(r)
	}()
	hb := headPool.Get().(*[]byte)
	defer headPool.Put(hb)

	// 1. The request head, bounded in size and time.
	head, extra, err := readHead(c, *hb, time.Now().Add(p.cfg.HeaderTimeout))
	if err != nil {
		p.refuseHead(c, r, *hb, err)
		return
	}
	req, err := parseHead(head)
	if err != nil {
		p.refuseHead(c, r, *hb, err)
		return
	}
	kind, t, path, err := classify(req)
	if kind != "" && t.port != 0 {
		p.setTarget(r, kind, t)
	}
	if err != nil {
		p.refuseHead(c, r, *hb, err)
		return
	}

	// 2. The allowlist, before anything is resolved.
	if _, ok := match(p.cfg.Allow, t); !ok {
		p.refuseWith(c, r, *hb, 403, t.String(), "not in network.allow")
		return
	}

	// 3. Resolve and connect from the host.
	up, addr, status, reason := p.connect(t)
	if up == nil {
		p.refuseWith(c, r, *hb, status, t.String(), reason)
		return
	}
	defer p.untrack(up)
	p.setAddress(r, addr)

	ab := relayPool.Get().(*[]byte)
	defer relayPool.Put(ab)
	bb := relayPool.Get().(*[]byte)
	defer relayPool.Put(bb)
	if kind == MethodConnect {
		p.tunnel(c, up, r, t, extra, *ab, *bb)
		return
	}
	p.forward(c, up, r, req, t, path, extra, *ab, *bb)
}

// tunnel answers 200, starts relaying the upstream's bytes (a server that
// speaks first is heard at once), and checks the program's first bytes,
// whenever they come: a ClientHello's server name must be the CONNECT
// host. The upstream receives nothing from the program before the check
// has passed.
func (p *Proxy) tunnel(c, up net.Conn, r *record, t target, extra, ab, bb []byte) {
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		p.setReason(r, fmt.Sprintf("program: clear read deadline: %v", err))
		return
	}
	p.setAllowed(r, true)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.setReason(r, fmt.Sprintf("program: write: %v", err))
		return
	}
	down := p.startPipe(r, up, c, bb, &r.recv, "upstream", "program")
	defer func() { <-down }()
	h := peekHello(c, extra, ab[:0:helloMax])
	if h.ioErr != "" {
		p.setReason(r, h.ioErr)
		_ = c.Close() // both ends stop: the upstream's relay returns
		_ = up.Close()
		return
	}
	if h.err == "" && h.sni != "" {
		sni := strings.ToLower(strings.TrimSuffix(h.sni, "."))
		if t.ip.IsValid() || sni != t.host {
			h.err = fmt.Sprintf("TLS server name %.255q differs from the CONNECT host %q", h.sni, t.host)
		}
	}
	if h.err != "" {
		p.refuse(r, h.err)
		_ = c.Close() // both ends stop: the upstream's relay returns
		_ = up.Close()
		return
	}
	if err := p.send(up, h.bytes, &r.sent); err != nil {
		p.endWith(r, err, "upstream")
		_ = c.Close()
		_ = up.Close()
		return
	}
	if h.eof {
		p.ended(r, c, up)
		return
	}
	p.pipe(r, c, up, ab, &r.sent, "program", "upstream")
}

// forward sends the one request upstream in origin form, then relays every
// further byte of the connection to that upstream only.
func (p *Proxy) forward(c, up net.Conn, r *record, req request, t target, path string, extra, ab, bb []byte) {
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		p.setReason(r, fmt.Sprintf("program: clear read deadline: %v", err))
		return
	}
	p.setAllowed(r, true)
	out := rewrite(ab[:0], req, t, path)
	if err := p.send(up, out, &r.sent); err != nil {
		p.endWith(r, err, "upstream")
		return
	}
	if err := p.send(up, extra, &r.sent); err != nil {
		p.endWith(r, err, "upstream")
		return
	}
	p.relay(r, c, up, ab, bb)
}

// endWith records why a relay stopped: a cut at max_bytes (a policy
// reason) or an I/O error on the side named.
func (p *Proxy) endWith(r *record, err error, side string) {
	if errors.Is(err, errMaxBytes) {
		p.refuse(r, fmt.Sprintf("max_bytes (%d) reached", p.cfg.MaxBytes))
		return
	}
	p.setReason(r, fmt.Sprintf("%s: %v", side, err))
}

// relay copies both ways until both sides have ended, each direction with
// its own fixed buffer; an end of stream is passed on as a half-close.
func (p *Proxy) relay(r *record, c, up net.Conn, ab, bb []byte) {
	down := p.startPipe(r, up, c, bb, &r.recv, "upstream", "program")
	p.pipe(r, c, up, ab, &r.sent, "program", "upstream")
	<-down
}

// startPipe runs one direction of the relay in a goroutine of the proxy's;
// the channel closes when it ends.
func (p *Proxy) startPipe(r *record, src, dst net.Conn, buf []byte, n *atomic.Int64, srcName, dstName string) <-chan struct{} {
	done := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		p.pipe(r, src, dst, buf, n, srcName, dstName)
	}()
	return done
}

// ended passes on the program's end of stream to the upstream.
func (p *Proxy) ended(r *record, src, dst net.Conn) {
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err == nil {
			return
		}
	}
	_ = src.Close() // no half-close: the other direction ends too
	_ = dst.Close()
}

func (p *Proxy) pipe(r *record, src, dst net.Conn, buf []byte, n *atomic.Int64, srcName, dstName string) {
	for {
		m, rerr := src.Read(buf)
		if m > 0 {
			if err := p.send(dst, buf[:m], n); err != nil {
				p.endWith(r, err, dstName)
				_ = src.Close() // both ends stop: the other direction's read returns
				_ = dst.Close()
				return
			}
		}
		if rerr == nil {
			continue
		}
		if rerr == io.EOF {
			p.ended(r, src, dst)
			return
		}
		p.setReason(r, fmt.Sprintf("%s: %v", srcName, rerr))
		_ = src.Close()
		_ = dst.Close()
		return
	}
}

// connect resolves t (a name) on the host, keeps the addresses a name may
// reach, and dials them in order within DialTimeout. On failure it returns
// the status and reason of the refusal.
func (p *Proxy) connect(t target) (net.Conn, netip.AddrPort, int, string) {
	addrs := []netip.Addr{t.ip}
	if !t.ip.IsValid() {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		ips, err := p.cfg.Resolve(ctx, t.host)
		cancel()
		if err != nil {
			return nil, netip.AddrPort{}, 502, fmt.Sprintf("cannot resolve %s: %v", t.host, err)
		}
		addrs = addrs[:0]
		var internals []string
		for _, ip := range ips {
			ip = ip.Unmap()
			if why := p.unreachable(ip); why != "" {
				if len(internals) < 4 {
					internals = append(internals, ip.String()+" ("+why+")")
				}
				continue
			}
			if len(addrs) < 8 {
				addrs = append(addrs, ip)
			}
		}
		if len(addrs) == 0 {
			if len(internals) == 0 {
				return nil, netip.AddrPort{}, 502, fmt.Sprintf("cannot resolve %s: no address", t.host)
			}
			return nil, netip.AddrPort{}, 403, fmt.Sprintf("%s resolves to %s: a name never reaches loopback, private, link-local or other internal addresses, nor this host's own (an IP rule can allow one)",
				t.host, strings.Join(internals, ", "))
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	var errs []string
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, uint16(t.port))
		up, err := p.cfg.Dial(ctx, ap)
		if err == nil {
			if !p.track(up) {
				return nil, netip.AddrPort{}, 502, reasonRunEnded
			}
			return up, ap, 0, ""
		}
		errs = append(errs, err.Error())
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, 502, fmt.Sprintf("cannot connect to %s: %s", t, strings.Join(errs, "; "))
}

// refuseHead refuses a request whose head could not be read or parsed.
func (p *Proxy) refuseHead(c net.Conn, r *record, buf []byte, err error) {
	var he *headError
	switch {
	case errors.As(err, &he):
		p.refuseWith(c, r, buf, he.status, "this request", he.msg)
	case errors.Is(err, errHeadTimeout):
		p.refuseWith(c, r, buf, 408, "this request", fmt.Sprintf("no complete request head within %v", p.cfg.HeaderTimeout))
	default:
		// The program closed or reset the connection: nobody to answer.
		p.refuse(r, err.Error())
	}
}

// refuseLimited refuses a connection beyond max_connections or max_bytes,
// after reading its request head (within HeaderTimeout) to name its target.
func (p *Proxy) refuseLimited(c net.Conn, r *record, reason string) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		p.refusing--
		delete(p.open, c)
		p.mu.Unlock()
		_ = c.Close() // may be closed already by Close
		p.finish(r)
	}()
	hb := headPool.Get().(*[]byte)
	defer headPool.Put(hb)
	what := "this connection"
	if head, _, err := readHead(c, *hb, time.Now().Add(p.cfg.HeaderTimeout)); err == nil {
		if req, err := parseHead(head); err == nil {
			if kind, t, _, err := classify(req); err == nil {
				p.setTarget(r, kind, t)
				what = t.String()
			}
		}
	}
	p.refuseWith(c, r, *hb, 403, what, reason)
}

// refuseWith records the refusal and answers it: the status, a plain-text
// body naming the policy, the target and the reason. It then drains (a
// little, briefly) what the program still sends, so that closing does not
// reset the connection before the program has read the answer.
func (p *Proxy) refuseWith(c net.Conn, r *record, buf []byte, status int, what, reason string) {
	p.refuse(r, reason)
	body := p.refusalBody(what, reason)
	if status >= 500 {
		body = fmt.Sprintf("nsbox: policy %q: %s: %s\n", p.cfg.Policy, what, reason)
	}
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(refusalResponse(status, body)); err != nil {
		return // the program is gone: the record has the refusal
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // best effort: the answer is written
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	for total := 0; total < 64<<10; {
		n, err := c.Read(buf)
		total += n
		if err != nil {
			return
		}
	}
}

func (p *Proxy) refusalBody(what, reason string) string {
	return fmt.Sprintf("nsbox: policy %q does not allow %s (%s)\n", p.cfg.Policy, what, reason)
}

var statusText = map[int]string{
	400: "Bad Request",
	403: "Forbidden",
	408: "Request Timeout",
	431: "Request Header Fields Too Large",
	502: "Bad Gateway",
}

func refusalResponse(status int, body string) []byte {
	var b []byte
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, statusText[status]...)
	b = append(b, "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nConnection: close\r\n\r\n"...)
	return append(b, body...)
}
