package result

// Network is what a run in network allowlist mode did through nsbox's
// proxy (docs/network.md): every connection the program opened to it,
// allowed or refused. Absent for a run without network.
type Network struct {
	Mode  string `json:"mode"`  // NetworkAllowlist
	Proxy string `json:"proxy"` // the proxy's address inside the sandbox, "127.0.0.1:3128"
	// Connections are in the order the program opened them, at most
	// MaxConnectionRecords; [] when none.
	Connections []Connection `json:"connections"`
	// ConnectionsDropped counts the connections past MaxConnectionRecords,
	// counted in the totals below but not listed.
	ConnectionsDropped int   `json:"connections_dropped"`
	Refused            int   `json:"refused"`        // connections refused; each is also a violation of kind network
	BytesSent          int64 `json:"bytes_sent"`     // program to hosts, all connections
	BytesReceived      int64 `json:"bytes_received"` // hosts to program, all connections
}

// Connection is one connection the program opened to the proxy.
type Connection struct {
	Host    string `json:"host"`    // as the program asked for it: a name or an IP literal
	Port    int    `json:"port"`    // 0 when the request named none that could be read
	Method  string `json:"method"`  // ConnectTunnel, ConnectHTTP, or "" for a request that could not be read
	Address string `json:"address"` // the address the proxy connected to, ip:port; "" when it connected to none
	Allowed bool   `json:"allowed"` // the policy allowed it and the proxy relayed it
	// Reason says why the proxy refused or ended the connection: not on
	// the allow list, an SNI that differs from the host, a limit; "" for
	// a connection that ended normally.
	Reason        string `json:"reason"`
	BytesSent     int64  `json:"bytes_sent"`     // program to host
	BytesReceived int64  `json:"bytes_received"` // host to program
	StartMS       int64  `json:"start_ms"`       // when it was accepted, from the proxy's start
	DurationMS    int64  `json:"duration_ms"`
}

// NetworkAllowlist is Network.Mode of a run that reached the hosts of its
// policy's network.allow through the proxy.
const NetworkAllowlist = "allowlist"

// The methods of Connection.Method.
const (
	ConnectTunnel = "CONNECT" // a tunnel (HTTPS: TLS from the program to the host)
	ConnectHTTP   = "HTTP"    // plain HTTP forwarded by the proxy, one request
)

// MaxConnectionRecords bounds Network.Connections: a program that opens
// connections in a loop cannot grow the result, or the memory holding it,
// past it.
const MaxConnectionRecords = 1000
