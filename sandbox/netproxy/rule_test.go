package netproxy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: the rule's String, or the error's text
		wildcard bool
		ip       bool
		err      bool
	}{
		{in: "api.example.com:443", want: "api.example.com:443"},
		{in: "API.Example.COM.:443", want: "api.example.com:443"},
		{in: "*.pypi.org:443", want: "*.pypi.org:443", wildcard: true},
		{in: "*.PyPI.org.:443", want: "*.pypi.org:443", wildcard: true},
		{in: "127.0.0.1:8080", want: "127.0.0.1:8080", ip: true},
		{in: "[::1]:8080", want: "[::1]:8080", ip: true},
		{in: "[2001:DB8::1]:443", want: "[2001:db8::1]:443", ip: true},
		{in: "[::ffff:127.0.0.1]:80", want: "127.0.0.1:80", ip: true},
		{in: "my_host.internal.example:1", want: "my_host.internal.example:1"},
		{in: "xn--bcher-kva.example:65535", want: "xn--bcher-kva.example:65535"},

		{in: "", want: "empty rule", err: true},
		{in: "api.example.com", want: "no port", err: true},
		{in: "api.example.com:", want: "no port after the colon", err: true},
		{in: "api.example.com:0", want: "port 0 out of range", err: true},
		{in: "api.example.com:65536", want: "port 65536 out of range", err: true},
		{in: "api.example.com:999999", want: "out of range", err: true},
		{in: "api.example.com:https", want: "not a number", err: true},
		{in: "api.example.com:+443", want: "not a number", err: true},
		{in: ":443", want: "empty host", err: true},
		{in: ".:443", want: "empty host", err: true},
		{in: "*:443", want: "wildcard must be *.name", err: true},
		{in: "a.*.example.com:443", want: "wildcard must be *.name", err: true},
		{in: "*example.com:443", want: "wildcard must be *.name", err: true},
		{in: "*.*.example.com:443", want: "bad character", err: true},
		{in: "*.com:443", want: "whole top-level domain", err: true},
		{in: "*.:443", want: "empty host", err: true},
		{in: "bücher.example:443", want: "punycode", err: true},
		{in: "exa mple.com:443", want: "bad character", err: true},
		{in: "example..com:443", want: "empty label", err: true},
		{in: "-example.com:443", want: "starting or ending with '-'", err: true},
		{in: strings.Repeat("a", 64) + ".com:443", want: "longer than 63", err: true},
		{in: strings.Repeat("abcdefghi.", 26) + "com:443", want: "more than 253", err: true},
		{in: "127.1:443", want: "neither a name nor a valid IP", err: true},
		{in: "0x7f.0.0.1:443", want: "neither a name nor a valid IP", err: true},
		{in: "::1:443", want: "must be in brackets", err: true},
		{in: "[::1]", want: "no port", err: true},
		{in: "[::1]x:80", want: "expected :port", err: true},
		{in: "[::1:80", want: "unclosed [", err: true},
		{in: "[127.0.0.1]:80", want: "not an IPv6 address", err: true},
		{in: "[fe80::1%eth0]:80", want: "not an IPv6 address", err: true},
		{in: "user@example.com:443", want: "bad character", err: true},
	} {
		r, err := ParseRule(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseRule(%q) = %v, %v; want an error containing %q", tc.in, r, err, tc.want)
			}
			continue
		}
		if err != nil || r.String() != tc.want || r.Wildcard != tc.wildcard || r.IP.IsValid() != tc.ip {
			t.Errorf("ParseRule(%q) = %+v (%s), %v; want %s", tc.in, r, r, err, tc.want)
		}
		if again, err := ParseRule(r.String()); err != nil || again != r {
			t.Errorf("ParseRule(%q) does not round-trip: %+v, %v", r.String(), again, err)
		}
	}
}

func TestMatch(t *testing.T) {
	var rules []Rule
	for _, s := range []string{"api.example.com:443", "*.pypi.org:443", "127.0.0.1:8080", "[::1]:8080"} {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	for _, tc := range []struct {
		host string
		port int
		want string // the rule matched, "" for none
	}{
		{"api.example.com", 443, "api.example.com:443"},
		{"API.EXAMPLE.COM.", 443, "api.example.com:443"},
		{"api.example.com", 80, ""},
		{"x.api.example.com", 443, ""},
		{"example.com", 443, ""},
		{"files.pypi.org", 443, "*.pypi.org:443"},
		{"a.b.c.pypi.org", 443, "*.pypi.org:443"},
		{"pypi.org", 443, ""},
		{"evilpypi.org", 443, ""},
		{"pypi.org.evil.com", 443, ""},
		{"127.0.0.1", 8080, "127.0.0.1:8080"},
		{"::ffff:127.0.0.1", 8080, "127.0.0.1:8080"},
		{"127.0.0.2", 8080, ""},
		{"127.0.0.1", 8081, ""},
		{"[::1]", 8080, "[::1]:8080"},
		{"::1", 8080, "[::1]:8080"},
		{"localhost", 8080, ""},
		{"", 443, ""},
		{"bad host", 443, ""},
	} {
		r, ok := Match(rules, tc.host, tc.port)
		got := ""
		if ok {
			got = r.String()
		}
		if got != tc.want {
			t.Errorf("Match(%q, %d) = %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
}

// TestInternal: the addresses a name rule never reaches (DNS rebinding).
func TestInternal(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "127.255.0.1": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.1.2.3": true, "172.16.0.1": true, "192.168.0.1": true, "fc00::1": true, "fd12::1": true,
		"169.254.169.254": true, "fe80::1": true, "0.0.0.0": true, "::": true, "0.1.2.3": true,
		"224.0.0.1": true, "ff02::1": true, "255.255.255.255": true, "100.64.0.1": true,
		"100.127.255.255": true, "198.18.0.1": true, "240.0.0.1": true, "192.0.0.8": true,
		"64:ff9b::a00:1": true, "64:ff9b::7f00:1": true, "2002:7f00:1::1": true, "2002:c0a8:101::1": true,
		"::127.0.0.1": true, "fec0::1": true, "2001::1": true,

		"93.184.215.14": false, "8.8.8.8": false, "100.128.0.1": false, "203.0.113.7": false,
		"2606:4700::1111": false, "64:ff9b::808:808": false, "2002:808:808::1": false,
	} {
		if got := internal(netip.MustParseAddr(addr)) != ""; got != want {
			t.Errorf("internal(%s) = %q, want internal %v", addr, internal(netip.MustParseAddr(addr)), want)
		}
	}
}

// TestUnreachable: a name never reaches the host's own addresses either.
func TestUnreachable(t *testing.T) {
	self, err := hostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if !self[netip.MustParseAddr("127.0.0.1")] {
		t.Errorf("the host's addresses %v lack 127.0.0.1", self)
	}
	p := &Proxy{self: map[netip.Addr]bool{netip.MustParseAddr("198.51.100.9"): true}}
	for addr, want := range map[string]string{
		"198.51.100.9":        "this host's own address",
		"::ffff:198.51.100.9": "this host's own address",
		"198.51.100.10":       "",
		"10.0.0.1":            "private",
	} {
		if got := p.unreachable(netip.MustParseAddr(addr)); got != want {
			t.Errorf("unreachable(%s) = %q, want %q", addr, got, want)
		}
	}
}
