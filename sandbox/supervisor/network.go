package supervisor

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/nsbox/nsbox/sandbox/netproxy"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Network allowlist mode, host side: the proxy that serves the endpoint
// the init made on the run's loopback (spec.Proxy), and what it did, in
// the result. The proxy is the run's for its whole life: a warm sandbox's
// from Warm, a session's from Start; the cleanup stack closes it, and
// with it every connection, before the sandbox's other resources go.

// startProxy serves the listener the init sent with the plan's allow list
// and limits. It fails closed: a plan with network and no listener, a
// listener that is not the expected one, or an allow entry the proxy
// cannot parse stops the run before the program has reached anything.
func (sb *Sandbox) startProxy() error {
	f := sb.l.listener // closed here once served; closeHostEnds closes it again
	nw := sb.o.Plan.Network
	if nw == nil {
		if f != nil {
			f.Close()
			return errors.New("the init sent a proxy listener to a run without network")
		}
		return nil
	}
	if f == nil {
		return errors.New("the init sent no proxy listener")
	}
	ln, err := net.FileListener(f)
	f.Close() // FileListener holds its own copy
	if err != nil {
		return fmt.Errorf("serve the proxy listener: %w", err)
	}
	if got := ln.Addr().String(); got != spec.ProxyAddr {
		ln.Close()
		return fmt.Errorf("the proxy listener is bound to %s, not %s", got, spec.ProxyAddr)
	}
	rules := make([]netproxy.Rule, 0, len(nw.Allow))
	for i, a := range nw.Allow {
		r, err := netproxy.ParseRule(a)
		if err != nil {
			ln.Close()
			return fmt.Errorf("network.allow element %d %q: %w", i+1, a, err)
		}
		rules = append(rules, r)
	}
	p, err := netproxy.Serve(ln, netproxy.Config{
		Policy:   sb.o.Plan.Policy.Name,
		Allow:    rules,
		MaxConns: int(nw.MaxConnections),
		MaxBytes: nw.MaxBytes,
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("start the proxy: %w", err)
	}
	sb.proxy = p
	sb.clean.push(func() error { p.Close(); return nil })
	return nil
}

// recordNetwork puts what the proxy did in r: the connections from the
// from-th on (a session's cell: those opened since the cell before) and
// a violation of kind network for each refused one. final closes the
// proxy first (the run is over): connections still open are ended.
// Nothing without network.
func (sb *Sandbox) recordNetwork(r *result.Result, from int, final bool) {
	p := sb.proxy
	if p == nil {
		return
	}
	var conns []netproxy.Connection
	if final {
		conns = p.Close()
	} else {
		conns = p.Connections()
	}
	n := &result.Network{Mode: result.NetworkAllowlist, Proxy: spec.ProxyAddr, Connections: []result.Connection{}}
	for _, c := range conns[min(from, len(conns)):] {
		n.BytesSent += c.BytesSent
		n.BytesReceived += c.BytesReceived
		if !c.Allowed {
			n.Refused++
		}
		// Past the cap a connection is counted, not listed, and its
		// refusal is no violation of its own: a loop of refused
		// connections cannot grow the result.
		if len(n.Connections) == result.MaxConnectionRecords {
			n.ConnectionsDropped++
			continue
		}
		if !c.Allowed {
			t := target(c.Host, c.Port)
			r.Violations = append(r.Violations, result.Violation{
				Kind: result.ViolationNetwork, Name: t,
				Detail: fmt.Sprintf("the proxy refused a connection to %s: %s (policy %s)", or(t, "an unreadable request"), c.Reason, sb.o.Plan.Policy.Name),
			})
		}
		n.Connections = append(n.Connections, result.Connection{
			Host: c.Host, Port: c.Port, Method: c.Method, Address: c.Address, Allowed: c.Allowed,
			Reason: c.Reason, BytesSent: c.BytesSent, BytesReceived: c.BytesReceived,
			StartMS: c.StartedMS, DurationMS: c.DurationMS,
		})
	}
	if final {
		n.ConnectionsDropped += p.Omitted()
	}
	r.Network = n
}

// proxyMark is where a session's next cell's connections start.
func (sb *Sandbox) proxyMark() int {
	if sb.proxy == nil {
		return 0
	}
	return len(sb.proxy.Connections())
}

// target is host:port as a violation names it: just the host for a
// request whose port was not read, and "" for one not read at all.
func target(host string, port int) string {
	if port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// refusedEnds makes a program that failed (an uncaught exception, exit
// 1) after the proxy refused it a connection a policy_violation, as
// applyReport does after a refusal of the Python layer: the refusal is
// the likely cause, and the violations say which host it was.
func refusedEnds(r *result.Result) {
	if r.Network == nil || r.Network.Refused == 0 || r.Status != result.StatusError || r.ExitCode == nil || *r.ExitCode != 1 {
		return
	}
	r.Status = result.StatusPolicyViolation
	r.Reason = fmt.Sprintf("the program failed after the proxy refused %d connection(s)", r.Network.Refused)
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
