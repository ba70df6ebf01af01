// Package netproxy is the host side of the allowlist network: an HTTP
// proxy (CONNECT tunnels and plain HTTP forwarding) that lets a sandboxed
// program reach exactly the host:port targets its policy allows, resolves
// and connects on the host, and records every connection.
//
// The program sits in its own network namespace with only loopback; the
// proxy's listening socket lives there, created by the sandbox's init, and
// is served from the host by Serve. The program has no resolver: names
// are looked up here, and only names the policy allows.
//
// # One connection
//
//	accept          refused at once beyond MaxConns or once MaxBytes is spent (403)
//	request head    at most MaxHeadBytes and MaxHeaderLines, within HeaderTimeout;
//	                parsed strictly by hand (400, 408, 431)
//	target          CONNECT host:port, or an absolute http:// URI (port 80 by default);
//	                anything else 400
//	allowlist       Match against Config.Allow before anything is resolved (403)
//	resolve         on the host; a name never reaches loopback, private, link-local,
//	                multicast, CGNAT or other internal addresses, nor the host's own
//	                (DNS rebinding: only an IP rule reaches those) (403; 502 when it
//	                does not resolve)
//	connect         the permitted addresses in order within DialTimeout (502)
//	CONNECT         200; the upstream's bytes are relayed at once; the program's
//	                first bytes, whenever they come, are read (at most one TLS
//	                record) and parsed by crypto/tls as a ClientHello without
//	                answering it: a server name that differs from the CONNECT host
//	                (any server name, for an IP target) closes both ends and the
//	                upstream has received nothing from the program; otherwise the
//	                bytes read are replayed upstream and the tunnel relays
//	plain HTTP      the request line rewritten to origin form, Host set from the URI
//	                (a Host header naming another site never reaches the upstream),
//	                Proxy-* and the hop-by-hop Connection and Keep-Alive dropped,
//	                Connection: close added; then every further byte of the
//	                connection goes to that one upstream, and both close: one
//	                checked target per connection
//	relay           both directions with fixed buffers, end of stream passed on as
//	                a half-close, every byte charged to MaxBytes
//
// Refusals before a tunnel is established are HTTP answers (403 for the
// policy, 502 when the target cannot be resolved or reached) with a
// plain-text body naming the policy, the target and the reason. Beyond
// max_connections the answer is 403 as well, not 503: it is the policy's
// limit, and clients that retry 503 would only spin against it. Every
// refusal is a Connection with Allowed false and a Reason.
//
// Resolve and Dial must return once their context is cancelled: Close
// cancels it and waits for them.
//
// # What is not protected
//
// The payload is not inspected. What the program sends to an allowed
// target (over TLS or not) reaches it; a tunnel whose first bytes are not
// a TLS handshake, or a ClientHello without a server name, is relayed
// uninspected to the allowed address. The server-name check sees the
// ClientHello's clear-text name only: a shared front (a CDN) at an allowed
// address may route on names inside the encrypted channel (domain fronting,
// Encrypted Client Hello). Requests are not reused or pipelined across
// targets, but the requests on one connection are not parsed beyond the
// first head. Connections have no idle timeout: the run's own time limit
// ends them. The host's own addresses are those it had when Serve started.
//
// # Memory bound
//
// Everything the program can make the proxy hold is bounded by
//
//	MemoryBound = MaxConns × connBytes + refusalSlots × refusalBytes + MaxRecords × recordBytes
//	connBytes   = MaxHeadBytes + 2 × relayBufBytes + tlsParseBytes + 2 × stackBytes
//
// per open connection: the request-head buffer, one relay buffer for
// each direction (the first also holds the ClientHello read, at most
// helloMax bytes), crypto/tls's copies of that ClientHello (tlsParseBytes
// = 4 × helloMax) and two goroutines; refusalSlots connections beyond the
// limits are read for their target with a head buffer each, later ones
// answered without reading; MaxRecords records of recordBytes each (names
// are at most 253 bytes, reasons cut at maxReason). The kernel's socket
// buffers (two sockets per connection) are the kernel's, bounded by its
// TCP memory settings and charged to the caller's cgroup.
package netproxy
