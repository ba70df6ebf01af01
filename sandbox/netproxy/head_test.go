package netproxy

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		head   string
		status int    // 0: parses
		kind   string // when it parses and classifies
		target string
		path   string
		err    string
	}{
		{head: "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", kind: "CONNECT", target: "api.example.com:443"},
		{head: "CONNECT [::1]:8080 HTTP/1.1\n\n", kind: "CONNECT", target: "[::1]:8080"},
		{head: "GET http://Example.COM/a/b?c=d HTTP/1.1\r\n\r\n", kind: "HTTP", target: "example.com:80", path: "/a/b?c=d"},
		{head: "GET HTTP://example.com:8080 HTTP/1.0\r\n\r\n", kind: "HTTP", target: "example.com:8080", path: "/"},
		{head: "HEAD http://example.com?x HTTP/1.1\r\n\r\n", kind: "HTTP", target: "example.com:80", path: "/?x"},
		{head: "DELETE http://127.0.0.1:9/x HTTP/1.1\r\nX-Empty:\r\n\r\n", kind: "HTTP", target: "127.0.0.1:9", path: "/x"},

		{head: "\r\nCONNECT a.test:443 HTTP/1.1\r\n\r\n", status: 400, err: "empty line"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\n\r\n\r\n", status: 400, err: "empty line"},
		{head: "CONNECT a.test:443  HTTP/1.1\r\n\r\n", status: 400, err: "request line"},
		{head: "CONNECT a.test:443 HTTP/1.1 x\r\n\r\n", status: 400, err: "request line"},
		{head: "CONNECT a.test:443 HTTP/3\r\n\r\n", status: 400, err: "not HTTP/1.1"},
		{head: "CONN\x00ECT a.test:443 HTTP/1.1\r\n\r\n", status: 400, err: "bad method"},
		{head: "CONNECT a.test:443\rX HTTP/1.1\r\n\r\n", status: 400, err: "bare CR"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\nHost : a\r\n\r\n", status: 400, err: "bad header line"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\n: a\r\n\r\n", status: 400, err: "bad header line"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\nNoColon\r\n\r\n", status: 400, err: "bad header line"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\nA: b\r\n c\r\n\r\n", status: 400, err: "folded"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\nA: b\x01c\r\n\r\n", status: 400, err: "control byte"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\n", status: 400, err: "blank line"},
		{head: "CONNECT a.test:443 HTTP/1.1\r\n" + strings.Repeat("A: b\r\n", MaxHeaderLines+1) + "\r\n", status: 431, err: "header lines"},

		{head: "CONNECT a.test HTTP/1.1\r\n\r\n", kind: "-", err: "has no port"},
		{head: "CONNECT a.test:0 HTTP/1.1\r\n\r\n", kind: "-", err: "out of range"},
		{head: "CONNECT a.test:443/x HTTP/1.1\r\n\r\n", kind: "-", err: "bad authority"},
		{head: "CONNECT 127.1:443 HTTP/1.1\r\n\r\n", kind: "-", err: "neither a name nor"},
		{head: "CONNECT a%2etest:443 HTTP/1.1\r\n\r\n", kind: "-", err: "bad authority"},
		{head: "GET /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n", kind: "-", err: "not a proxy request"},
		{head: "OPTIONS * HTTP/1.1\r\n\r\n", kind: "-", err: "not a proxy request"},
		{head: "GET https://a.test/ HTTP/1.1\r\n\r\n", kind: "-", err: "use CONNECT"},
		{head: "GET ftp://a.test/ HTTP/1.1\r\n\r\n", kind: "-", err: "not a proxy request"},
		{head: "GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", kind: "-", err: "bad authority"},
		{head: "GET http://a.test\\@b.test/ HTTP/1.1\r\n\r\n", kind: "-", err: "bad authority"},
		{head: "GET http:///x HTTP/1.1\r\n\r\n", kind: "-", err: "empty host"},
		{head: "GET http://a.test/#f HTTP/1.1\r\n\r\n", kind: "-", err: "fragment"},
	} {
		req, err := parseHead([]byte(tc.head))
		if tc.status != 0 {
			var he *headError
			if !errors.As(err, &he) || he.status != tc.status || !strings.Contains(he.msg, tc.err) {
				t.Errorf("parseHead(%q) = %v; want %d %q", tc.head, err, tc.status, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseHead(%q): %v", tc.head, err)
			continue
		}
		kind, target, path, err := classify(req)
		if tc.kind == "-" {
			var he *headError
			if !errors.As(err, &he) || he.status != 400 || !strings.Contains(he.msg, tc.err) {
				t.Errorf("classify(%q) = %v; want 400 %q", tc.head, err, tc.err)
			}
			continue
		}
		if err != nil || kind != tc.kind || target.String() != tc.target || path != tc.path {
			t.Errorf("classify(%q) = %s %s %q, %v; want %s %s %q", tc.head, kind, target, path, err, tc.kind, tc.target, tc.path)
		}
	}
}

func TestRewrite(t *testing.T) {
	req, err := parseHead([]byte("GET http://[::1]:8080/x HTTP/1.0\r\nHOST: evil.test\r\nhost: evil2.test\r\n" +
		"PROXY-AUTHORIZATION: x\r\nConnection: Upgrade\r\nkeep-alive: 1\r\nAccept: */*\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, tg, path, err := classify(req)
	if err != nil {
		t.Fatal(err)
	}
	got := string(rewrite(nil, req, tg, path))
	want := "GET /x HTTP/1.0\r\nHost: [::1]:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
	if got != want {
		t.Errorf("rewrite = %q, want %q", got, want)
	}
}

// FuzzParseHead: no head makes the parser panic, and a head it accepts as
// plain HTTP is rewritten into one the parser accepts again, with exactly
// the target's Host, no proxy or connection header of the client's, and an
// origin-form path.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
		"GET http://example.com/a?b HTTP/1.1\r\nHost: evil\r\nProxy-Authorization: x\r\n\r\n",
		"POST http://[::1]:80/ HTTP/1.0\nContent-Length: 0\n\n",
		"GET / HTTP/1.1\r\n\r\n",
		"\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := parseHead(b)
		if err != nil {
			return
		}
		kind, tg, path, err := classify(req)
		if err != nil || kind != MethodHTTP {
			return
		}
		if _, ok := Match(nil, tg.host, tg.port); ok {
			t.Fatal("an empty allowlist matched")
		}
		out := rewrite(nil, req, tg, path)
		again, err := parseHead(out)
		if err != nil {
			t.Fatalf("rewritten head %q does not parse: %v", out, err)
		}
		if again.method != req.method || again.target != path || !strings.HasPrefix(path, "/") {
			t.Fatalf("rewritten request line %q %q from %q", again.method, again.target, req.target)
		}
		hosts := 0
		for _, h := range again.headers {
			n := strings.ToLower(h.name)
			switch {
			case n == "host":
				hosts++
				if h.value != strings.TrimSuffix(tg.String(), ":80") {
					t.Fatalf("Host %q for target %s", h.value, tg)
				}
			case n == "connection":
				if h.value != "close" {
					t.Fatalf("Connection %q", h.value)
				}
			case n == "keep-alive" || strings.HasPrefix(n, "proxy-"):
				t.Fatalf("header %q reached the upstream", h.name)
			}
		}
		if hosts != 1 || !bytes.HasSuffix(out, []byte("Connection: close\r\n\r\n")) {
			t.Fatalf("rewritten head %q", out)
		}
	})
}
