// Package netproxy is the host-side proxy of network allowlist mode
// (placeholder rule parser until the proxy lands).
package netproxy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one allow entry.
type Rule struct {
	Host     string
	Port     int
	Wildcard bool
	IP       netip.Addr
}

// ParseRule parses "host:port".
func ParseRule(s string) (Rule, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Rule{}, fmt.Errorf("not host:port: %v", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return Rule{}, fmt.Errorf("port %q out of range", port)
	}
	r := Rule{Host: strings.ToLower(host), Port: n}
	if ip, err := netip.ParseAddr(host); err == nil {
		r.IP = ip
		return r, nil
	}
	if h, ok := strings.CutPrefix(r.Host, "*."); ok {
		r.Wildcard, r.Host = true, h
	}
	if r.Host == "" {
		return Rule{}, fmt.Errorf("empty host")
	}
	return r, nil
}
