package netproxy

import (
	"fmt"
	"net"
	"net/netip"
)

// Addresses a name rule never reaches (DNS rebinding: a public name whose
// records point at the host's loopback or its private network). Only an
// IP-literal rule reaches them.
var internalPrefixes = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Prefixes that embed an IPv4 address a gateway may forward to: the
// embedded address is checked too.
var embedding = []struct {
	prefix netip.Prefix
	offset int // byte offset of the IPv4 address
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12},   // NAT64
	{netip.MustParsePrefix("64:ff9b:1::/48"), 12}, // local NAT64
	{netip.MustParsePrefix("2002::/16"), 2},       // 6to4
}

// internal says why a name rule may not reach ip, or "" when it may.
func internal(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	for _, p := range internalPrefixes {
		if p.prefix.Contains(ip) {
			return p.what
		}
	}
	if ip.Is6() {
		b := ip.As16()
		for _, e := range embedding {
			if e.prefix.Contains(ip) {
				v4 := netip.AddrFrom4([4]byte(b[e.offset : e.offset+4]))
				if why := internal(v4); why != "" {
					return why + " (embedded in " + e.prefix.String() + ")"
				}
			}
		}
	}
	return ""
}

// hostAddrs lists the addresses of the host's interfaces.
func hostAddrs() (map[netip.Addr]bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's interface addresses: %w", err)
	}
	self := map[netip.Addr]bool{}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			self[p.Addr().Unmap()] = true
		}
	}
	return self, nil
}

// unreachable says why a name may not reach ip: an internal address, or
// one of this host's own; "" when it may.
func (p *Proxy) unreachable(ip netip.Addr) string {
	if why := internal(ip); why != "" {
		return why
	}
	if p.self[ip.Unmap()] {
		return "this host's own address"
	}
	return ""
}
