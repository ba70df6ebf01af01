"""The network check: with a proxy in the config (a policy whose
network.mode is "allowlist"), the program reaches the network only
through the proxy nsbox serves on loopback in the run's network
namespace. HTTP_PROXY and HTTPS_PROXY name it, so requests, httpx and
urllib go there without code changes; the proxy checks each host against
the policy's network.allow, resolves names on the host and records every
connection.

Refused here, each as a violation of kind "network" and a
PermissionError: a TCP connect to anything but the proxy (AF_UNIX stays
allowed), a datagram sent to an address (no UDP, so no DNS), a name
lookup of any host but the proxy's (the sandbox has no resolver: names
are the proxy's business), and a new AF_INET or AF_INET6 socket that is
not a stream socket. The kernel layer refuses the same sockets again
(seccomp allows AF_INET and AF_INET6 stream sockets only, and the
namespace has only loopback); this layer tells the model what happened
and what to do instead.

The decision depends only on the event's arguments and the proxy
address decoded from the config before the program ran. It never calls
the program's code: addresses are compared by exact type (a str or int
subclass is never the proxy) and shown through _net_text.
"""

# Linux's values: the runner imports no socket module (bound.py).
AF_INET = 2
AF_INET6 = 10
SOCK_STREAM = 1
SOCK_DGRAM = 2
SOCK_RAW = 3
SOCK_TYPE_MASK = 0xF  # SOCK_NONBLOCK and SOCK_CLOEXEC are flag bits above it
# The most of a host name or address a report line carries.
NET_TEXT_MAX = 255

# The audit events the network check looks at (added to the hook's watch
# only when the config has a proxy). socket.connect covers connect_ex,
# socket.gethostbyname covers gethostbyname_ex.
NET_EVENTS = frozenset((
    "socket.__new__", "socket.connect", "socket.sendto", "socket.sendmsg",
    "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
    "socket.getnameinfo"))
_NET_LOOKUPS = frozenset(("socket.getaddrinfo", "socket.gethostbyname",
                          "socket.gethostbyaddr"))
_NET_FAMILIES = {-1: "AF_INET", AF_INET: "AF_INET", AF_INET6: "AF_INET6"}
_NET_TYPES = {SOCK_DGRAM: "SOCK_DGRAM", SOCK_RAW: "SOCK_RAW"}


def _net_proxy_hint(proxy):
    return ("the sandbox reaches the network only through nsbox's proxy at %s:%d "
            "(HTTP_PROXY, HTTPS_PROXY), which lets through the hosts the policy's "
            "network.allow lists" % proxy)


def _net_text(v):
    """v as text for a report, without calling any of its methods: only
    an exact str, bytes or int is shown."""
    t = type(v)
    if t is str:
        s = v
    elif t is bytes:
        s = v.decode("ascii", "replace")
    elif t is int:
        s = int.__repr__(v)
    else:
        s = "?"
    return s if len(s) <= NET_TEXT_MAX else s[:NET_TEXT_MAX] + "..."


def _net_address(addr):
    """An AF_INET or AF_INET6 address tuple as "host:port" ("[host]:port"
    for IPv6); the first two items are read with tuple's own method, so a
    tuple subclass runs none of its code."""
    parts = tuple.__getitem__(addr, slice(None, 2))
    host = _net_text(parts[0]) if parts else "?"
    port = _net_text(parts[1]) if len(parts) > 1 else "?"
    return ("[%s]:%s" if ":" in host else "%s:%s") % (host, port)


def _net_is_proxy(proxy, addr):
    """Whether addr is exactly the proxy's (host, port)."""
    return (type(addr) is tuple and len(addr) == 2
            and type(addr[0]) is str and addr[0] == proxy[0]
            and type(addr[1]) is int and addr[1] == proxy[1])


def _net_is_proxy_host(proxy, host):
    """Whether host names the proxy's host: the same IP literal, as str
    or as bytes (anyio passes the host encoded)."""
    return (type(host) is str and host == proxy[0]
            or type(host) is bytes and host == proxy[0].encode("ascii"))


def _net_refusal(proxy, event, args):
    """None when event (one of NET_EVENTS) with args may go on under the
    proxy (host, port); else (name, detail) for the violation."""
    hint = _net_proxy_hint(proxy)
    if event == "socket.__new__":
        # (socket, family, type, proto) as ints; -1 is the default, which
        # becomes AF_INET and SOCK_STREAM.
        family, kind = args[1], args[2]
        if family not in _NET_FAMILIES or kind == -1 or kind & SOCK_TYPE_MASK == SOCK_STREAM:
            return None
        kind &= SOCK_TYPE_MASK
        shown = "socket(%s, %s)" % (_NET_FAMILIES[family],
                                   _NET_TYPES.get(kind, "type %d" % kind))
        return shown, ("%s refused: only TCP stream sockets, no UDP (so no DNS) and no raw "
                       "sockets; %s" % (shown, hint))
    if event == "socket.connect":
        # (socket, address). An address that is no tuple is AF_UNIX's
        # path (allowed); the kernel refuses every other family.
        addr = args[1]
        if not issubclass(type(addr), tuple) or _net_is_proxy(proxy, addr):
            return None
        shown = _net_address(addr)
        return shown, "connect to %s refused: %s" % (shown, hint)
    if event in ("socket.sendto", "socket.sendmsg"):
        # (socket, address or None): a datagram, or a TCP Fast Open
        # connect, to that address.
        addr = args[1]
        if addr is None or not issubclass(type(addr), tuple) or _net_is_proxy(proxy, addr):
            return None
        shown = _net_address(addr)
        return shown, ("datagram to %s refused: no UDP and no DNS in the sandbox; %s"
                       % (shown, hint))
    if event in _NET_LOOKUPS or event == "socket.getnameinfo":
        # (host, ...) for a lookup; ((host, port, ...), flags) for getnameinfo.
        host = args[0]
        if event == "socket.getnameinfo":
            host = (tuple.__getitem__(host, 0) if issubclass(type(host), tuple)
                    and tuple.__len__(host) else None)
        if _net_is_proxy_host(proxy, host):
            return None
        shown = _net_text(host)
        return shown, ("name lookup of %r refused: the sandbox has no resolver; names are "
                       "resolved by the proxy on the host: use HTTP(S) through HTTP_PROXY "
                       "(requests, httpx and urllib do by default), to a host the policy's "
                       "network.allow lists" % shown)
    return None
