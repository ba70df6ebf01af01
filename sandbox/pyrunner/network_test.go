package pyrunner

import (
	"bufio"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProxy is a listener on 127.0.0.1 that records each request's first
// line's method and target, and refuses it with 403, as nsbox's proxy refuses a host.
type fakeProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	wg    sync.WaitGroup
}

func startFakeProxy(t *testing.T) *fakeProxy {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &fakeProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				first, err := r.ReadString('\n')
				if err != nil {
					return
				}
				for { // the headers
					l, err := r.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				p.mu.Lock()
				// The method and target: http.client's CONNECT says HTTP/1.0.
				p.lines = append(p.lines, strings.Join(strings.Fields(first)[:min(2, len(strings.Fields(first)))], " "))
				p.mu.Unlock()
				c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// TestNetworkRealClients: requests and httpx from the web root, with the
// proxy variables a run in allowlist mode has, reach the network only
// through the proxy and so trip none of the runner's network checks:
// they look up only the proxy's address and connect only to it.
func TestNetworkRealClients(t *testing.T) {
	site := rootSite(t, "web", "requests")
	p := startFakeProxy(t)
	proxy := p.ln.Addr().String()
	cfg := Config{Mode: ModeRun, Proxy: proxy}
	program := `
import ssl, requests, httpx
for name, get in [("requests", requests.get), ("httpx", httpx.get)]:
    for url in ["https://api.example.test/v1", "http://api.example.test/v1"]:
        try:
            print(name, url, get(url, timeout=10).status_code)
        except Exception as e:
            print(name, url, type(e).__name__)
`
	r := runProgramEnv(t, cfg, program, "", []string{
		// PYTHONPATH stands in for the root's venv (the runner runs with -S).
		"PYTHONPATH=" + site,
		"HTTP_PROXY=http://" + proxy, "HTTPS_PROXY=http://" + proxy, "ALL_PROXY=http://" + proxy,
		"NO_PROXY=",
		"SSL_CERT_FILE=" + filepath.Join(site, "certifi", "cacert.pem"),
	})
	if r.exit != 0 || len(r.report.Violations) != 0 {
		t.Fatalf("want a clean run, no violations\n%s", r)
	}
	// Each client's HTTPS request is a CONNECT the proxy refused, each
	// plain one a forwarded GET answered with the 403.
	for _, want := range []string{
		"requests https://api.example.test/v1 ProxyError", "requests http://api.example.test/v1 403",
		"httpx https://api.example.test/v1 ProxyError", "httpx http://api.example.test/v1 403",
	} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("stdout lacks %q\n%s", want, r)
		}
	}
	p.ln.Close()
	p.wg.Wait()
	got := slices.Clone(p.lines)
	slices.Sort(got)
	want := []string{
		"CONNECT api.example.test:443", "CONNECT api.example.test:443",
		"GET http://api.example.test/v1", "GET http://api.example.test/v1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the proxy saw %q, want %q", got, want)
	}
}

// TestNetworkRealClientsWithoutProxy: with no proxy variables, requests
// resolves the host itself, and the runner refuses that lookup and says
// to use the proxy.
func TestNetworkRealClientsWithoutProxy(t *testing.T) {
	site := rootSite(t, "web", "requests")
	p := startFakeProxy(t)
	cfg := Config{Mode: ModeRun, Proxy: p.ln.Addr().String()}
	program := `
import requests
try:
    requests.get("https://api.example.test/v1", timeout=10)
except Exception as e:
    print(type(e).__name__)
`
	r := runProgramEnv(t, cfg, program, "", []string{"PYTHONPATH=" + site})
	if r.exit != 0 || len(r.report.Violations) != 1 {
		t.Fatalf("want one violation\n%s", r)
	}
	v := r.report.Violations[0]
	if v.Kind != KindNetwork || v.Name != "api.example.test" || !strings.Contains(v.Detail, "HTTP_PROXY") {
		t.Errorf("violation %+v, want a network one for api.example.test naming HTTP_PROXY", v)
	}
	if len(p.lines) != 0 {
		t.Errorf("the proxy saw %q without being named", p.lines)
	}
}
