package policies

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// certifiBundle is where the web root holds certifi's CA bundle: the
// root's venv is /venv (rootfs-builder), its packages in site-packages.
const certifiBundle = "/venv/lib/python3.11/site-packages/certifi/cacert.pem"

// TestBuiltinWeb: the web policy is default on the web root with the
// network in allowlist mode and no host of its own, the web lists, and
// the CA bundle of its lock in the program's environment.
func TestBuiltinWeb(t *testing.T) {
	p, err := Builtin("web")
	if err != nil {
		t.Fatal(err)
	}
	def, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	if p.Python.Root != "web" {
		t.Errorf("root %q, want web", p.Python.Root)
	}
	want := Network{Mode: NetworkAllowlist, Allow: []string{}, MaxConnections: 32, MaxBytes: 256 * mib}
	if p.Network.Mode != want.Mode || !slices.Equal(p.Network.Allow, want.Allow) ||
		p.Network.MaxConnections != want.MaxConnections || p.Network.MaxBytes != want.MaxBytes {
		t.Errorf("network %+v, want %+v", p.Network, want)
	}
	if !slices.Equal(p.Allowlist.Imports, pyrunner.WebAllow) {
		t.Errorf("imports %v, want pyrunner.WebAllow", p.Allowlist.Imports)
	}
	for _, m := range []string{"subprocess", "ctypes", "multiprocessing"} {
		if slices.Contains(p.Allowlist.Imports, m) {
			t.Errorf("web allows %s", m)
		}
	}
	// The runner's network check decides about sockets; a denied socket
	// event would refuse the proxy too.
	if !slices.Equal(p.Allowlist.DenyEvents, pyrunner.DefaultDenyEvents) ||
		slices.ContainsFunc(p.Allowlist.DenyEvents, func(e string) bool { return strings.HasPrefix(e, "socket.") }) {
		t.Errorf("deny_events %v, want default's, no socket event", p.Allowlist.DenyEvents)
	}
	if p.Env["SSL_CERT_FILE"] != certifiBundle || p.Env["REQUESTS_CA_BUNDLE"] != certifiBundle {
		t.Errorf("env %v, want SSL_CERT_FILE and REQUESTS_CA_BUNDLE at %s", p.Env, certifiBundle)
	}
	if p.Limits.Timeout.Duration != 60*time.Second || p.Limits.CPUTime != def.Limits.CPUTime ||
		p.Limits.Memory != def.Limits.Memory || !slices.Equal(p.Sandbox.Require, def.Sandbox.Require) {
		t.Errorf("limits %+v sandbox %+v: want default's, with a 60s clock", p.Limits, p.Sandbox)
	}

	// The root, when built (make web, which make test runs first), holds
	// the bundle the environment names.
	roots := os.Getenv("NSBOX_ROOTS_DIR")
	if roots == "" {
		roots = "/var/lib/nsbox/roots"
	}
	if _, err := os.Stat(filepath.Join(roots, "web")); err == nil {
		if _, err := os.Stat(filepath.Join(roots, "web", certifiBundle)); err != nil {
			t.Errorf("the web root lacks the CA bundle the policy names: %v", err)
		}
	} else if os.Getenv("NSBOX_MUST_WORK") == "1" {
		t.Errorf("the web root is not built (make web): %v", err)
	}
}

// TestWebExtended: a user's policy extends web with its hosts and keeps
// everything else.
func TestWebExtended(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.toml")
	src := "extends = \"web\"\n[network]\nallow = [\"api.example.com:443\", \"*.pypi.org:443\"]\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	web, err := Builtin("web")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Network.Allow, []string{"api.example.com:443", "*.pypi.org:443"}) ||
		p.Network.Mode != NetworkAllowlist || p.Network.MaxConnections != web.Network.MaxConnections ||
		p.Python.Root != "web" || !slices.Equal(p.Allowlist.Imports, web.Allowlist.Imports) {
		t.Errorf("extended web: %+v", p)
	}
}
