package netproxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// hello is what the program sent first in a tunnel: the bytes (to replay
// upstream), the TLS server name if they were a ClientHello, eof when the
// program ended its stream before them, ioErr when reading them failed
// (the program reset the connection, or Close closed it), or err, the
// reason to refuse.
type hello struct {
	bytes []byte
	sni   string
	eof   bool
	ioErr string
	err   string
}

const recordTypeHandshake = 0x16

var (
	errStop     = errors.New("ClientHello read")
	errHelloBig = errors.New("ClientHello larger than one TLS record")
	errNoWrite  = errors.New("the proxy does not answer a ClientHello")
)

// peekHello reads the program's first bytes into rec (its capacity bounds
// them) while crypto/tls parses them as a ClientHello, stopping right after
// the parse: nothing is answered and nothing is sent upstream. It waits as
// long as the program does (an idle tunnel holds its connection as any
// other): Close, closing c, ends the wait.
//
// Outcomes: a ClientHello (with or without a server name); the end of the
// program's stream before any byte; a first byte that does not start a TLS
// handshake record (relayed as is, not inspected, without waiting for
// more); a TLS handshake record that does not parse as a ClientHello
// within one record (refused: the server name cannot be checked).
func peekHello(c net.Conn, extra, rec []byte) hello {
	// The bytes already read after the request head come first; they are
	// shorter than rec's capacity (a head and its extra fit in
	// MaxHeadBytes).
	hc := &helloConn{c: c, r: c, rec: append(rec, extra...)}
	// The first byte alone decides whether this is TLS: a short message
	// of another protocol is not held back waiting for a record header.
	var probe [1]byte
	hc.pos = len(hc.rec)
	for len(hc.rec) == 0 {
		if _, err := hc.Read(probe[:]); err != nil && len(hc.rec) == 0 {
			if err == io.EOF {
				return hello{eof: true}
			}
			return hello{ioErr: fmt.Sprintf("program: %v", err)}
		}
	}
	if hc.rec[0] != recordTypeHandshake {
		return hello{bytes: hc.rec}
	}
	hc.pos = 0 // crypto/tls reads the recorded byte again
	var sni string
	seen := false
	srv := tls.Server(hc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, seen = h.ServerName, true
			return nil, errStop
		},
	})
	// Handshake, not HandshakeContext: no goroutine; Close closing c ends
	// the reads.
	err := srv.Handshake()
	switch {
	case seen:
		return hello{bytes: hc.rec, sni: sni}
	case hc.rerr != nil:
		// Nothing was sent upstream: the connection just ends.
		return hello{ioErr: fmt.Sprintf("program: %v", hc.rerr)}
	default:
		return hello{err: fmt.Sprintf("TLS ClientHello not readable, so its server name cannot be checked: %v", err)}
	}
}

// helloConn is the connection crypto/tls parses the ClientHello from:
// reads are recorded (and bounded by rec's capacity), writes fail. Reads
// first return the recorded bytes from pos on.
type helloConn struct {
	c    net.Conn
	r    io.Reader
	rec  []byte
	pos  int
	rerr error // the first error reading c
}

func (h *helloConn) Read(b []byte) (int, error) {
	if h.pos < len(h.rec) {
		n := copy(b, h.rec[h.pos:])
		h.pos += n
		return n, nil
	}
	room := cap(h.rec) - len(h.rec)
	if room == 0 {
		return 0, errHelloBig
	}
	if len(b) > room {
		b = b[:room]
	}
	n, err := h.r.Read(b)
	h.rec = append(h.rec, b[:n]...)
	h.pos = len(h.rec)
	if err != nil && h.rerr == nil {
		h.rerr = err
	}
	return n, err
}

func (h *helloConn) Write([]byte) (int, error)        { return 0, errNoWrite }
func (h *helloConn) Close() error                     { return nil }
func (h *helloConn) LocalAddr() net.Addr              { return h.c.LocalAddr() }
func (h *helloConn) RemoteAddr() net.Addr             { return h.c.RemoteAddr() }
func (h *helloConn) SetDeadline(time.Time) error      { return nil }
func (h *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (h *helloConn) SetWriteDeadline(time.Time) error { return nil }
