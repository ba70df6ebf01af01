package netproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The request head's bounds: its bytes (request line, header lines and the
// blank line) and its header lines. A head beyond either is refused with
// 431 before it is parsed.
const (
	MaxHeadBytes   = 16 << 10
	MaxHeaderLines = 100
)

// headError is a refusal of the request head with its HTTP status.
type headError struct {
	status int
	msg    string
}

func (e *headError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &headError{status: 400, msg: fmt.Sprintf(format, a...)}
}

var errHeadTimeout = errors.New("no complete request head in time")

// readHead reads a request head into buf (len(buf) bounds it) until its
// blank line or the deadline. It returns the head and any bytes the client
// sent after it (the start of a body or of a TLS ClientHello).
func readHead(c net.Conn, buf []byte, deadline time.Time) (head, extra []byte, err error) {
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil, nil, fmt.Errorf("set read deadline: %w", err)
	}
	n, lineStart, lines := 0, 0, 0
	for {
		if n == len(buf) {
			return nil, nil, &headError{status: 431, msg: fmt.Sprintf("request head larger than %d bytes", len(buf))}
		}
		m, rerr := c.Read(buf[n:])
		scan := n
		n += m
		for {
			i := bytes.IndexByte(buf[scan:n], '\n')
			if i < 0 {
				break
			}
			end := scan + i
			line := bytes.TrimSuffix(buf[lineStart:end], []byte{'\r'})
			if len(line) == 0 {
				return buf[:end+1], buf[end+1 : n], nil
			}
			lines++
			if lines > MaxHeaderLines+1 {
				return nil, nil, &headError{status: 431, msg: fmt.Sprintf("more than %d header lines", MaxHeaderLines)}
			}
			lineStart, scan = end+1, end+1
		}
		if rerr != nil {
			if errors.Is(rerr, os.ErrDeadlineExceeded) {
				return nil, nil, errHeadTimeout
			}
			if n == 0 {
				return nil, nil, fmt.Errorf("read request head: %w", rerr)
			}
			return nil, nil, badRequest("connection ended inside the request head (%d bytes): %v", n, rerr)
		}
	}
}

// request is a parsed request head. Strings are copies: the head buffer is
// reused.
type request struct {
	method, target, proto string
	headers               []header
}

type header struct{ name, value string }

// parseHead parses a complete head (as readHead returns it: lines ending in
// LF or CRLF, the last one empty). It is strict: anything a lenient server
// might read differently is refused.
func parseHead(b []byte) (request, error) {
	var req request
	if len(b) > MaxHeadBytes {
		return req, &headError{status: 431, msg: fmt.Sprintf("request head larger than %d bytes", MaxHeadBytes)}
	}
	if !bytes.HasSuffix(b, []byte{'\n'}) {
		return req, badRequest("request head does not end with a blank line")
	}
	lines := bytes.Split(b[:len(b)-1], []byte{'\n'})
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte{'\r'})
		if bytes.IndexByte(lines[i], '\r') >= 0 {
			return req, badRequest("bare CR in request head")
		}
	}
	if len(lines) < 2 || len(lines[len(lines)-1]) != 0 {
		return req, badRequest("request head does not end with a blank line")
	}
	lines = lines[:len(lines)-1]
	for i, l := range lines {
		if len(l) == 0 {
			return req, badRequest("empty line at line %d of the request head", i+1)
		}
	}
	if len(lines)-1 > MaxHeaderLines {
		return req, &headError{status: 431, msg: fmt.Sprintf("more than %d header lines", MaxHeaderLines)}
	}
	parts := bytes.Split(lines[0], []byte{' '})
	if len(parts) != 3 {
		return req, badRequest("request line is not METHOD TARGET HTTP/1.x")
	}
	method, tgt, proto := parts[0], parts[1], parts[2]
	if len(method) == 0 || len(method) > 32 || !isToken(method) {
		return req, badRequest("bad method %.40q", method)
	}
	if len(tgt) == 0 {
		return req, badRequest("empty request target")
	}
	for _, c := range tgt {
		if c <= ' ' || c >= 0x7f {
			return req, badRequest("request target has a byte 0x%02x", c)
		}
	}
	if p := string(proto); p != "HTTP/1.1" && p != "HTTP/1.0" {
		return req, badRequest("protocol %.20q is not HTTP/1.1 or HTTP/1.0", proto)
	}
	req.method, req.target, req.proto = string(method), string(tgt), string(proto)
	for _, l := range lines[1:] {
		if l[0] == ' ' || l[0] == '\t' {
			return req, badRequest("folded header line")
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 || !isToken(l[:colon]) {
			return req, badRequest("bad header line %.40q", l)
		}
		value := bytes.Trim(l[colon+1:], " \t")
		for _, c := range value {
			if c < ' ' && c != '\t' || c == 0x7f {
				return req, badRequest("header %.40q has a control byte 0x%02x", l[:colon], c)
			}
		}
		req.headers = append(req.headers, header{name: string(l[:colon]), value: string(value)})
	}
	return req, nil
}

// isToken: RFC 9110 tchar.
func isToken(b []byte) bool {
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return len(b) > 0
}

// Kinds of request, as recorded in Connection.Method.
const (
	MethodConnect = "CONNECT"
	MethodHTTP    = "HTTP"
)

// classify finds the request's kind, its target and, for plain HTTP, the
// origin-form path to send upstream.
func classify(req request) (kind string, t target, path string, err error) {
	if req.method == "CONNECT" {
		t, err = parseAuthority(req.target, 0)
		return MethodConnect, t, "", err
	}
	rest, ok := cutPrefixFold(req.target, "http://")
	if !ok {
		if _, tls := cutPrefixFold(req.target, "https://"); tls {
			return MethodHTTP, t, "", badRequest("https:// in a request line: use CONNECT for HTTPS")
		}
		return "", t, "", badRequest("%s %.80s is not a proxy request (CONNECT host:port or an absolute http:// URI)", req.method, req.target)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, path := rest[:end], rest[end:]
	if strings.ContainsRune(path, '#') {
		return MethodHTTP, t, "", badRequest("fragment in request target")
	}
	switch {
	case path == "":
		path = "/"
	case path[0] == '?':
		path = "/" + path
	}
	t, err = parseAuthority(authority, 80)
	return MethodHTTP, t, path, err
}

// parseAuthority parses host[:port]; defPort 0 means the port is required.
func parseAuthority(s string, defPort int) (target, error) {
	if strings.ContainsAny(s, "@/\\%") {
		return target{}, badRequest("bad authority %.80q", s)
	}
	hasPort := strings.LastIndexByte(s, ':') > strings.LastIndexByte(s, ']')
	if !hasPort {
		if defPort == 0 {
			return target{}, badRequest("%.80q has no port", s)
		}
		s += ":" + strconv.Itoa(defPort)
	}
	hostPart, port, err := splitHostPort(s)
	if err != nil {
		return target{}, badRequest("target %.80q: %v", s, err)
	}
	host, ip, err := parseHost(hostPart)
	if err != nil {
		return target{}, badRequest("target %.80q: %v", s, err)
	}
	return target{host: host, ip: ip, port: port}, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// dropped says whether a client's header must not reach the upstream:
// Host (set from the URI instead: no fronting by Host), the proxy's own
// headers, and the hop-by-hop connection headers (Connection: close is
// added).
func dropped(name string) bool {
	n := strings.ToLower(name)
	return n == "host" || n == "connection" || n == "keep-alive" || strings.HasPrefix(n, "proxy-")
}

// rewrite appends the head sent upstream for a plain HTTP request:
// origin-form request line, Host from the URI, the client's other headers
// in order, Connection: close.
func rewrite(dst []byte, req request, t target, path string) []byte {
	dst = append(dst, req.method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, ' ')
	dst = append(dst, req.proto...)
	dst = append(dst, "\r\nHost: "...)
	authority := t.String()
	if t.port == 80 {
		authority = strings.TrimSuffix(authority, ":80")
	}
	dst = append(dst, authority...)
	dst = append(dst, "\r\n"...)
	for _, h := range req.headers {
		if dropped(h.name) {
			continue
		}
		dst = append(dst, h.name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.value...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "Connection: close\r\n\r\n"...)
}
