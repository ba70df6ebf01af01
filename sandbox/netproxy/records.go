package netproxy

// What the proxy records of each connection, each field set under
// Proxy.mu (the byte counts are atomic), for Connections and Close.

import (
	"net/netip"
	"sync/atomic"
	"time"
)

// record is one connection's record: c is guarded by Proxy.mu, the byte
// counts are atomic (the relay adds to them without the lock).
type record struct {
	c          Connection
	start, end time.Time
	done       bool
	sent, recv atomic.Int64
}

func (p *Proxy) newRecordLocked() *record {
	r := &record{start: time.Now()}
	r.c.StartedMS = r.start.Sub(p.epoch).Milliseconds()
	if len(p.records) < MaxRecords {
		p.records = append(p.records, r)
	} else {
		p.omitted++
	}
	return r
}

func (p *Proxy) finish(r *record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.done, r.end = true, time.Now()
}

func (p *Proxy) setTarget(r *record, method string, t target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.c.Method, r.c.Host, r.c.Port = method, t.host, t.port
}

func (p *Proxy) setAddress(r *record, a netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.c.Address = a.String()
}

func (p *Proxy) setAllowed(r *record, allowed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.c.Allowed = allowed
}

// setReason records why the connection ended; the first reason stands.
func (p *Proxy) setReason(r *record, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	setReasonLocked(r, reason)
}

// refuse records a policy refusal (or cut): Allowed false, the reason.
func (p *Proxy) refuse(r *record, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.c.Allowed = false
	setReasonLocked(r, reason)
}

func setReasonLocked(r *record, reason string) {
	if r.c.Reason != "" {
		return
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	r.c.Reason = reason
}
