package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/result"
)

// auditNetworkFixture is a log of three finished runs: eeee0001 without
// network, eeee0002 that reached api.example.com and was refused a host
// whose name holds a terminal escape, eeee0003 that reached
// API.example.com only.
func auditNetworkFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	db, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	relayed := func(host string) result.Connection {
		return result.Connection{Host: host, Port: 443, Method: result.ConnectTunnel, Address: "192.0.2.7:443",
			Allowed: true, BytesSent: 517, BytesReceived: 8192, StartMS: 3, DurationMS: 41}
	}
	for i, n := range []*result.Network{
		nil,
		{Mode: result.NetworkAllowlist, Proxy: "127.0.0.1:3128", Refused: 1, ConnectionsDropped: 2,
			BytesSent: 517, BytesReceived: 8192, Connections: []result.Connection{
				relayed("api.example.com"),
				{Host: "evil\x1b[2J.example", Port: 80, Method: result.ConnectHTTP, Reason: "not on the allow list", StartMS: 50},
			}},
		{Mode: result.NetworkAllowlist, Proxy: "127.0.0.1:3128", BytesSent: 517, BytesReceived: 8192,
			Connections: []result.Connection{relayed("API.example.com")}},
	} {
		r := &audit.Run{ID: "eeee000" + string(rune('1'+i)), Start: now.Add(time.Duration(i-3) * time.Minute), Policy: "web",
			NsboxVersion: "test", Status: string(result.StatusOK), Network: n}
		if n != nil && n.Refused > 0 {
			r.Violations = []result.Violation{{Kind: result.ViolationNetwork, Name: "evil.example:80", Detail: "refused"}}
		}
		if err := db.Finish(r); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestAuditNetwork: list --host, show (text and JSON), stats and verify
// with the network section.
func TestAuditNetwork(t *testing.T) {
	db := auditNetworkFixture(t)
	for _, tc := range []struct {
		host string
		want []string
	}{
		{"api.example.com", []string{"eeee0003", "eeee0002"}},
		{"API.EXAMPLE.COM", []string{"eeee0003", "eeee0002"}},
		{"evil\x1b[2J.example", []string{"eeee0002"}},
		{"example.com", []string{}},
	} {
		if got := auditListIDs(t, db, "--host", tc.host); !slices.Equal(got, tc.want) {
			t.Errorf("list --host %q = %v, want %v", tc.host, got, tc.want)
		}
	}

	out, code := runAudit(t, "show", "--audit-db", db, "eeee0002")
	t.Log("\n" + out)
	for _, want := range []string{"allowlist via 127.0.0.1:3128: 4 connection(s), 1 refused; 517 bytes sent, 8192 received",
		"Connections:", "api.example.com", "192.0.2.7:443", `evil\x1b[2J.example`, "not on the allow list",
		"and 2 more connections"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show (exit %d) lacks %q", code, want)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("show sent an escape sequence from a host name to the terminal")
	}
	if out, _ := runAudit(t, "show", "--audit-db", db, "eeee0001"); !strings.Contains(out, "network:") || strings.Contains(out, "Connections:") {
		t.Errorf("show of a run without network:\n%s", out)
	}

	out, code = runAudit(t, "show", "--json", "--audit-db", db, "eeee0002")
	var r struct {
		Network *result.Network `json:"network"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("show --json: exit %d, %v", code, err)
	}
	if r.Network == nil || len(r.Network.Connections) != 2 || r.Network.Connections[1].Allowed || r.Network.ConnectionsDropped != 2 {
		t.Errorf("show --json network = %+v", r.Network)
	}
	if out, _ := runAudit(t, "show", "--json", "--audit-db", db, "eeee0001"); !strings.Contains(out, `"network": null`) {
		t.Errorf("show --json of a run without network lacks \"network\": null:\n%s", out)
	}

	out, _ = runAudit(t, "stats", "--json", "--audit-db", db)
	for _, want := range []string{`"network_runs": 2`, `"refused_connections": 1`, `"name": "evil.example:80"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stats --json lacks %q:\n%s", want, out)
		}
	}
	out, _ = runAudit(t, "stats", "--audit-db", db)
	for _, want := range []string{"Network: 2 run(s) in allowlist mode, 1 connection(s) refused", "Most refused network targets:", "evil.example:80"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lacks %q:\n%s", want, out)
		}
	}

	// A connection edited behind nsbox's back: verify names the run.
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE run_connections SET bytes_received = 1 WHERE run_id = 'eeee0003'`); err != nil {
		t.Fatal(err)
	}
	out, code = runAudit(t, "verify", "--audit-db", db)
	if code != exitChainBroken || !strings.Contains(out, "BROKEN at seq 3 (run eeee0003)") {
		t.Errorf("verify after a connection was edited: exit %d, %q", code, out)
	}
}
