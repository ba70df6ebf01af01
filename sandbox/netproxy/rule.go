package netproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one entry of a policy's network.allow list: "host:port".
//
// Host is a lower-case DNS name without its trailing dot, a wildcard
// "*.example.com" (any name ending in ".example.com", at any depth, never
// "example.com" itself), or an IP literal (then IP is valid and Host is its
// text; IPv6 is written in brackets: "[::1]:8080"). Port is 1..65535 and
// always given: a rule never means "any port".
type Rule struct {
	Host     string
	Port     int
	Wildcard bool
	IP       netip.Addr
}

// String is the rule as written in a policy, normalised.
func (r Rule) String() string {
	return hostPort(r.Host, r.IP, r.Port)
}

// hostPort joins a host and a port, bracketing an IPv6 literal.
func hostPort(host string, ip netip.Addr, port int) string {
	if ip.IsValid() && ip.Is6() {
		return "[" + ip.String() + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// maxName is the longest DNS name (RFC 1035), without the trailing dot.
const maxName = 253

// ParseRule parses one network.allow entry. The errors say what to write
// instead.
func ParseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("empty rule: write host:port")
	}
	hostPart, port, err := splitHostPort(s)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	if rest, ok := strings.CutPrefix(hostPart, "*."); ok {
		name, err := parseName(rest)
		if err != nil {
			return Rule{}, fmt.Errorf("rule %q: wildcard: %w", s, err)
		}
		if !strings.Contains(name, ".") {
			return Rule{}, fmt.Errorf("rule %q: wildcard *.%s covers a whole top-level domain: name at least two labels after *.", s, name)
		}
		return Rule{Host: "*." + name, Port: port, Wildcard: true}, nil
	}
	if strings.Contains(hostPart, "*") {
		return Rule{}, fmt.Errorf("rule %q: wildcard must be *.name (a leading \"*.\" and nothing else)", s)
	}
	host, ip, err := parseHost(hostPart)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	return Rule{Host: host, Port: port, IP: ip}, nil
}

// splitHostPort splits "host:port" or "[v6]:port". The host is returned
// as written (brackets kept), the port checked.
func splitHostPort(s string) (string, int, error) {
	var host, port string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("unclosed [ in IPv6 address")
		}
		host, port = s[:end+1], s[end+1:]
		if port == "" {
			return "", 0, errors.New("no port: write [address]:port")
		}
		if port[0] != ':' {
			return "", 0, errors.New("expected :port after ]")
		}
		port = port[1:]
	} else {
		i := strings.LastIndexByte(s, ':')
		if i < 0 {
			return "", 0, errors.New("no port: write host:port")
		}
		host, port = s[:i], s[i+1:]
		if strings.Contains(host, ":") {
			return "", 0, errors.New("IPv6 address must be in brackets: [address]:port")
		}
	}
	if host == "" {
		return "", 0, errors.New("empty host")
	}
	p, err := parsePort(port)
	if err != nil {
		return "", 0, err
	}
	return host, p, nil
}

func parsePort(s string) (int, error) {
	if s == "" {
		return 0, errors.New("no port after the colon")
	}
	if len(s) > 5 {
		return 0, fmt.Errorf("port %.10q out of range 1..65535", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q is not a number", s)
		}
	}
	p, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", s, err)
	}
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %d out of range 1..65535", p)
	}
	return p, nil
}

// parseHost checks a host as written in a rule or a request: an IP
// literal (IPv6 in brackets) or a DNS name. It returns the normalised
// name (lower case, no trailing dot) and, for a literal, the address.
func parseHost(s string) (string, netip.Addr, error) {
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return "", netip.Addr{}, errors.New("unclosed [ in IPv6 address")
		}
		ip, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("%.80q is not an IPv6 address (no zone)", s)
		}
		if ip.Is4In6() {
			ip = ip.Unmap()
			return ip.String(), ip, nil
		}
		return ip.String(), ip, nil
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		if !ip.Is4() {
			return "", netip.Addr{}, errors.New("IPv6 address must be in brackets")
		}
		return ip.String(), ip, nil
	}
	name, err := parseName(s)
	if err != nil {
		return "", netip.Addr{}, err
	}
	return name, netip.Addr{}, nil
}

// parseName checks a DNS name: ASCII letters, digits, '-' and '_' in
// labels of 1..63 bytes, no label starting or ending with '-', at most 253
// bytes. One trailing dot is dropped, upper case folded. A name whose last
// label is all digits is refused: it would read as a (malformed) IPv4
// address to some clients.
func parseName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty host")
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", fmt.Errorf("host %.80q is not ASCII: write its punycode (xn--) form", s)
		}
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", errors.New("empty host")
	}
	if len(s) > maxName {
		return "", fmt.Errorf("host is %d bytes long, more than %d", len(s), maxName)
	}
	s = strings.ToLower(s)
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" {
			return "", fmt.Errorf("host %q has an empty label", s)
		}
		if len(l) > 63 {
			return "", fmt.Errorf("host %q has a label longer than 63 bytes", s)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host %q has a label starting or ending with '-'", s)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host %q has a bad character %q (allowed: letters, digits, '-', '_', '.')", s, c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return "", fmt.Errorf("host %q is neither a name nor a valid IP address", s)
	}
	return s, nil
}

// target is a checked request target: a normalised name or an IP literal.
type target struct {
	host string
	ip   netip.Addr
	port int
}

func (t target) String() string { return hostPort(t.host, t.ip, t.port) }

// Match returns the first rule that allows host:port. host may be a name
// (any case, trailing dot allowed) or an IP literal (IPv6 with or without
// brackets). Names match only name rules and addresses only IP rules: an
// address is never allowed because some allowed name resolves to it.
func Match(rules []Rule, host string, port int) (Rule, bool) {
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return match(rules, target{host: ip.Unmap().String(), ip: ip.Unmap(), port: port})
	}
	name, err := parseName(host)
	if err != nil {
		return Rule{}, false
	}
	return match(rules, target{host: name, port: port})
}

func match(rules []Rule, t target) (Rule, bool) {
	for _, r := range rules {
		if r.Port != t.port {
			continue
		}
		switch {
		case t.ip.IsValid():
			if r.IP.IsValid() && r.IP == t.ip {
				return r, true
			}
		case r.Wildcard:
			if suffix := r.Host[1:]; len(t.host) > len(suffix) && strings.HasSuffix(t.host, suffix) {
				return r, true
			}
		case !r.IP.IsValid():
			if r.Host == t.host {
				return r, true
			}
		}
	}
	return Rule{}, false
}
