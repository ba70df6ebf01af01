package audit

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestRoundTripNetwork: a run with 50 connections reads back equal from Get
// and List, in order, its hash verifies, and the result's network section
// it came from is left as it was.
func TestRoundTripNetwork(t *testing.T) {
	db := newDB(t)
	r := sampleRun("net")
	if err := db.Begin(r); err != nil {
		t.Fatal(err)
	}
	finishSample(r)
	fromResult := sampleNetwork(50)
	fromResult.ConnectionsDropped = 7
	r.Network = fromResult
	kept := *sampleNetwork(50)
	kept.ConnectionsDropped = 7
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*fromResult, kept) {
		t.Error("Finish changed the network section it was given")
	}
	if r.ChainVersion != chainVersion {
		t.Errorf("finished under encoding %d, want %d", r.ChainVersion, chainVersion)
	}
	got := get(t, db, "net")
	if err := sameRun(got, r); err != nil {
		t.Errorf("Get: %v", err)
	}
	if !reflect.DeepEqual(*got.Network, kept) {
		t.Errorf("network read back %+v, want %+v", got.Network, kept)
	}
	runs, err := db.List(Filter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("List = %d runs, %v", len(runs), err)
	}
	if err := sameRun(&runs[0], r); err != nil {
		t.Errorf("List: %v", err)
	}
	wantIntact(t, db, 1)

	// A run without network reads back without one, next to it.
	bare := &Run{ID: "bare", Start: time.Now(), Policy: "default", Status: "ok"}
	if err := db.Finish(bare); err != nil {
		t.Fatal(err)
	}
	if got := get(t, db, "bare"); got.Network != nil {
		t.Errorf("run without network read back with %+v", got.Network)
	}
	// One allowlist run that opened nothing: a network, no connections.
	quiet := &Run{ID: "quiet", Start: time.Now(), Policy: "web", Status: "ok",
		Network: &result.Network{Mode: result.NetworkAllowlist, Proxy: "127.0.0.1:3128"}}
	if err := db.Finish(quiet); err != nil {
		t.Fatal(err)
	}
	if got := get(t, db, "quiet"); got.Network == nil || got.Network.Connections == nil || len(got.Network.Connections) != 0 {
		t.Errorf("allowlist run without connections read back with %+v", got.Network)
	}
	wantIntact(t, db, 3)
}

// TestNetworkClipped: the row keeps at most result.MaxConnectionRecords
// connections (the rest counted as dropped) and text that Export carries
// exactly: valid UTF-8, bounded.
func TestNetworkClipped(t *testing.T) {
	db := newDB(t)
	r := sampleRun("many")
	finishSample(r)
	r.Network = sampleNetwork(result.MaxConnectionRecords + 3)
	r.Network.ConnectionsDropped = 5
	r.Network.Connections[0].Host = "bad\xffhost"
	r.Network.Connections[1].Reason = strings.Repeat("é", MaxConnectionTextBytes)
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	got := get(t, db, "many").Network
	switch {
	case len(got.Connections) != result.MaxConnectionRecords || got.ConnectionsDropped != 8:
		t.Errorf("%d connections, %d dropped; want %d and 8", len(got.Connections), got.ConnectionsDropped, result.MaxConnectionRecords)
	case got.Connections[0].Host != "bad\uFFFDhost":
		t.Errorf("host stored as %q", got.Connections[0].Host)
	case !utf8.ValidString(got.Connections[1].Reason) || len(got.Connections[1].Reason) > MaxConnectionTextBytes ||
		len(got.Connections[1].Reason) < MaxConnectionTextBytes-1:
		t.Errorf("long reason stored as %d bytes", len(got.Connections[1].Reason))
	}
	wantIntact(t, db, 1)
	var buf bytes.Buffer
	if err := db.Export(&buf); err != nil {
		t.Fatal(err)
	}
	var exported Run
	if err := exported.UnmarshalJSON(bytes.TrimSpace(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if rowHash(&exported) != exported.Hash {
		t.Error("the hash does not check from the export")
	}
}

func TestFinishRefusesNetworkWithoutMode(t *testing.T) {
	db := newDB(t)
	r := &Run{ID: "nomode", Start: time.Now(), Status: "ok", Network: &result.Network{Proxy: "127.0.0.1:3128"}}
	if err := db.Finish(r); err == nil || !strings.Contains(err.Error(), "without a mode") {
		t.Errorf("Finish of a network without a mode = %v", err)
	}
}

// TestVerifyFindsConnectionOnRunWithout: a connection row added to a run
// that had no network is an edit of that run.
func TestVerifyFindsConnectionOnRunWithout(t *testing.T) {
	db := newDB(t)
	for _, id := range []string{"a", "b"} {
		if err := db.Finish(&Run{ID: id, Start: time.Now(), Status: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	wantIntact(t, db, 2)
	if _, err := rawDB(t, db).Exec(`INSERT INTO run_connections VALUES ('a', 0, 'x.example', 443, 'CONNECT', '192.0.2.1:443', 1, '', 1, 1, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	b, err := db.Verify()
	if err != nil || b == nil || b.ID != "a" || b.Seq != 1 || !strings.Contains(b.Reason, "edited") {
		t.Errorf("Verify = %v, %v; want run a (seq 1) edited", b, err)
	}
}

// TestMigrateFromV2: a log written by a schema-2 nsbox (rows hashed under
// encodings 1 and 2, an unfinished run) is migrated in place: the old rows
// read back as they were written, without network, and still verify; the
// unfinished run finishes under encoding 3 with its connections, linked
// after them; a network added to an old row by hand is found.
func TestMigrateFromV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, stmt := range []string{`PRAGMA journal_mode = WAL`, createVersionTable, migrations[0], migrations[1],
		`INSERT INTO schema_version (version, applied_at) VALUES (1, 0), (2, 0)`} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	v1 := sampleRun("v1")
	finishSample(v1)
	v1.Seq, v1.PrevHash, v1.ChainVersion = 1, genesisHash, 1
	v1.Hash = rowHash(v1)
	insertV2(t, raw, v1)
	v2 := sampleRun("v2")
	finishSample(v2)
	v2.Reason = "exit status 3"
	v2.Supervisor = &Supervisor{MachineID: "m", BootID: "b", PID: 42, StartTicks: 7, Namespaces: "pid:[1] time:[2]"}
	v2.Seq, v2.PrevHash, v2.ChainVersion = 2, v1.Hash, 2
	v2.Hash = rowHash(v2)
	insertV2(t, raw, v2)
	open := sampleRun("open")
	open.Status, open.Supervisor = StatusUnfinished, thisHost().self
	insertV2(t, raw, open)

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	if err := raw.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != SchemaVersion {
		t.Fatalf("schema version %d, %v after Open; want %d", version, err, SchemaVersion)
	}
	wantIntact(t, db, 2)
	for _, want := range []*Run{v1, v2} {
		if err := sameRun(get(t, db, want.ID), want); err != nil {
			t.Errorf("%s after the migration: %v", want.ID, err)
		}
	}
	finishSample(open)
	open.Network = sampleNetwork(4)
	if err := db.Finish(open); err != nil {
		t.Fatal(err)
	}
	if open.Seq != 3 || open.PrevHash != v2.Hash || open.ChainVersion != chainVersion {
		t.Errorf("finished at seq %d after %s under %d, want 3 after %s under %d", open.Seq, open.PrevHash, open.ChainVersion, v2.Hash, chainVersion)
	}
	if err := sameRun(get(t, db, "open"), open); err != nil {
		t.Errorf("the run finished after the migration: %v", err)
	}
	wantIntact(t, db, 3)
	if ids := ids(mustList(t, db, Filter{Host: "api1.example.com"})); !slices.Equal(ids, []string{"open"}) {
		t.Errorf("runs that talked to api1.example.com: %v", ids)
	}

	// Encoding 2 does not cover the network: an old row given one (or a
	// connection) is an edit.
	for _, edit := range []string{
		`UPDATE runs SET network = 'allowlist' WHERE id = 'v2'`,
		`INSERT INTO run_connections VALUES ('v2', 0, 'x.example', 443, 'CONNECT', '', 0, '', 0, 0, 0, 0)`,
	} {
		t.Run(edit, func(t *testing.T) {
			tx, err := raw.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec(edit); err != nil {
				t.Fatal(err)
			}
			// Verify reads a snapshot of its own: commit, check, undo.
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			b, err := db.Verify()
			if err != nil || b == nil || b.ID != "v2" || !strings.Contains(b.Reason, "encoding 2") {
				t.Errorf("Verify = %v, %v; want v2, not covered by encoding 2", b, err)
			}
			if _, err := raw.Exec(`UPDATE runs SET network = '' WHERE id = 'v2'; DELETE FROM run_connections WHERE run_id = 'v2'`); err != nil {
				t.Fatal(err)
			}
			wantIntact(t, db, 3)
		})
	}
}

// insertV2 writes r as a schema-2 nsbox did: every column but the network
// ones.
func insertV2(t *testing.T, raw *sql.DB, r *Run) {
	t.Helper()
	insertV1(t, raw, r)
	machine, boot, pid, start, ns := supervisorColumns(r.Supervisor)
	if _, err := raw.Exec(`UPDATE runs SET chain_version = ?, reason = ?, supervisor_machine_id = ?, supervisor_boot_id = ?,
			supervisor_pid = ?, supervisor_start_ticks = ?, supervisor_ns = ? WHERE id = ?`,
		r.ChainVersion, r.Reason, machine, boot, pid, start, ns, r.ID); err != nil {
		t.Fatal(err)
	}
}

func mustList(t *testing.T, db *DB, f Filter) []Run {
	t.Helper()
	runs, err := db.List(f)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestListHost: --host lists the runs that opened a connection to the host,
// allowed or refused, whatever the ASCII case of the name; with other
// filters it narrows them. The query finds the runs through the host index.
func TestListHost(t *testing.T) {
	db := newDB(t)
	now := time.Now()
	add := func(id string, ago time.Duration, status result.Status, hosts ...string) {
		r := &Run{ID: id, Start: now.Add(-ago), Policy: "web", Status: string(status)}
		if hosts != nil {
			r.Network = &result.Network{Mode: result.NetworkAllowlist, Proxy: "127.0.0.1:3128"}
			for _, h := range hosts {
				r.Network.Connections = append(r.Network.Connections, result.Connection{Host: h, Port: 443, Allowed: h != "evil.example"})
			}
		}
		if err := db.Finish(r); err != nil {
			t.Fatal(err)
		}
	}
	add("none", 4*time.Hour, result.StatusOK)
	add("api", 3*time.Hour, result.StatusOK, "api.example.com", "api.example.com")
	add("both", 2*time.Hour, result.StatusError, "pypi.org", "API.Example.com")
	add("evil", time.Hour, result.StatusOK, "evil.example")
	add("sub", 0, result.StatusOK, "eu.api.example.com")
	for _, tc := range []struct {
		f    Filter
		want []string
	}{
		{Filter{Host: "api.example.com"}, []string{"both", "api"}},
		{Filter{Host: "Api.Example.COM"}, []string{"both", "api"}},
		{Filter{Host: "evil.example"}, []string{"evil"}},
		{Filter{Host: "example.com"}, nil},
		{Filter{Host: "api.example.com", Status: "error"}, []string{"both"}},
		{Filter{Host: "api.example.com", Limit: 1}, []string{"both"}},
		{Filter{Host: "api.example.com", Since: 150 * time.Minute}, []string{"both"}},
	} {
		if got := ids(mustList(t, db, tc.f)); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	query, args := listQuery(Filter{Host: "api.example.com"})
	rows, err := rawDB(t, db).Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if !strings.Contains(strings.Join(plan, "; "), "run_connections_host") {
		t.Errorf("the host filter does not use the host index: %q", plan)
	}
}

// TestStatsNetwork: the runs with network, their refused connections, and
// the network violations ranked by the runs that had them.
func TestStatsNetwork(t *testing.T) {
	db := newDB(t)
	refused := result.Violation{Kind: result.ViolationNetwork, Name: "evil.example.net:80", Detail: "not on the allow list"}
	for i, n := range []int{3, 6, 0} {
		r := &Run{ID: string(rune('a' + i)), Start: time.Now(), Policy: "web", Status: "ok"}
		if n > 0 {
			r.Network = sampleNetwork(n)
			for range r.Network.Refused {
				r.Violations = append(r.Violations, refused)
			}
		}
		if err := db.Finish(r); err != nil {
			t.Fatal(err)
		}
	}
	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.NetworkRuns != 2 || s.RefusedConnections != 3 {
		t.Errorf("%d network runs, %d refused connections; want 2 and 3", s.NetworkRuns, s.RefusedConnections)
	}
	if want := []Count{{Name: "evil.example.net:80", Runs: 2, Times: 3}}; !slices.Equal(s.TopNetwork, want) {
		t.Errorf("top network %+v, want %+v", s.TopNetwork, want)
	}
	if s, err := newDB(t).Stats(); err != nil || s.NetworkRuns != 0 || s.TopNetwork == nil {
		t.Errorf("Stats of an empty log = %+v, %v", s, err)
	}
}
