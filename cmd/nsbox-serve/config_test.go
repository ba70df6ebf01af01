package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFile: --config's keys are the flags' names; flags given
// override the file; nsbox mcp skips the listener's keys of a shared file;
// every error names the file, the line and the key.
func TestConfigFile(t *testing.T) {
	write := func(src string) string {
		p := filepath.Join(t.TempDir(), "service.toml")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shared := write(`# a file for both commands
policies = ["default", "datasci"]
max-sessions = 4
"pool" = 0
listen = "unix:/tmp/x.sock"
listen-public = false
audit-db = "/tmp/audit.db"
`)
	f, err := parseServeFlags("serve", []string{"--config", shared, "--max-sessions=7"})
	if err != nil {
		t.Fatal(err)
	}
	if f.policies != "default,datasci" || f.maxSessions != 7 || f.pool != 0 || f.listen != "unix:/tmp/x.sock" || f.auditDB != "/tmp/audit.db" || !f.set["pool"] {
		t.Errorf("serve with the shared file: %+v", f)
	}
	m, err := parseServeFlags("mcp", []string{"--config=" + shared})
	if err != nil {
		t.Fatalf("mcp with the shared file: %v", err)
	}
	if m.maxSessions != 4 || m.listen != "" || m.policies != "default,datasci" {
		t.Errorf("mcp with the shared file: %+v", m)
	}
	if m, _ := parseServeFlags("mcp", nil); m.pool != 1 {
		t.Errorf("mcp's default pool: %d, want 1", m.pool)
	}
	if _, err := parseServeFlags("mcp", []string{"--listen", "unix:/tmp/x"}); err == nil {
		t.Error("mcp --listen: accepted")
	}
	for _, tc := range []struct{ src, want string }{
		{"pool = 1\nmax-sesions = 4\n", ":2: max-sesions: unknown key (known: audit-db, listen, "},
		{"max-body = \"big\"\n", ":1: max-body: invalid value"},
		{"policies = [\"a\", 3]\n", ":1: policies: want an array of strings"},
		{"[limits]\npool = 1\n", ":1: limits: a table"},
		{"pool = 1\npool = 2\n", ":2: "},
		{"config = \"other.toml\"\n", ":1: config: unknown key"},
	} {
		p := write(tc.src)
		_, err := parseServeFlags("serve", []string{"--config", p})
		if err == nil || !strings.HasPrefix(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s%s...", tc.src, err, p, tc.want)
		}
	}
	if _, err := parseServeFlags("serve", []string{"--config", "/nonexistent/service.toml"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/service.toml") {
		t.Errorf("a missing file: %v", err)
	}
}
