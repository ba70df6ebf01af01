package audit

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestRowHashGolden pins the canonical encodings: a change to one breaks
// every chain already recorded, so it must be a new version with its own
// domain, not an edit. Version 1's value is the one it had before version 2
// existed.
func TestRowHashGolden(t *testing.T) {
	r := sampleRun("golden")
	finishSample(r)
	r.Seq, r.PrevHash = 7, genesisHash
	r.ChainVersion = 1
	const want1 = "1dcb22a9329fcf470d2baad8de1b674ca2a2d76732df22097010762b81a685e9"
	if got := rowHash(r); got != want1 {
		t.Errorf("rowHash v1 = %s, want %s", got, want1)
	}
	r.ChainVersion = 2
	r.Reason = "wall clock 2s"
	r.Supervisor = &Supervisor{MachineID: "3d1219c7c4c5404aaa1f6d2a48adfda4", BootID: "f45735f2-4c64-429a-8a99-c236215c2d65", PID: 4242, StartTicks: 436506,
		Namespaces: "pid:[4026531836] time:[4026531834]"}
	const want2 = "a2353bfb957a36ed9adcddfeb84d5dbcb93d172c49d590698dba66878f5ca17b"
	if got := rowHash(r); got != want2 {
		t.Errorf("rowHash v2 = %s, want %s", got, want2)
	}
	// Version 2 without a supervisor: five NULLs.
	r.Supervisor = nil
	const want2nil = "c9594e2e24a8459ef1fd0bd7409ac90d8b9fdacc9c0b2c15e8bbc2c2534dd7fe"
	if got := rowHash(r); got != want2nil {
		t.Errorf("rowHash v2 without supervisor = %s, want %s", got, want2nil)
	}
	// Version 3: version 2's fields, then the network. Without network it
	// still differs from version 2 (its domain, and the empty network).
	r.ChainVersion = 3
	const want3nil = "a94100fc3e2a64ffb597253dec6b73e533198c018a771ed333f51124bb01be2c"
	if got := rowHash(r); got != want3nil {
		t.Errorf("rowHash v3 without network = %s, want %s", got, want3nil)
	}
	r.Network = sampleNetwork(3)
	r.Network.ConnectionsDropped = 2
	const want3 = "87378d614f7cafc16667ea2e868ae4af57adc3c01b03918ec790bcc2c4e66607"
	if got := rowHash(r); got != want3 {
		t.Errorf("rowHash v3 = %s, want %s", got, want3)
	}
	// Version 4: version 3's fields, then the standard input.
	r.ChainVersion = 4
	const want4nil = "2c0be82f48a5abd7f4d11d8c6ad41ebd6254465ab2177c04950fdd8aa1c0e7c1"
	if got := rowHash(r); got != want4nil {
		t.Errorf("rowHash v4 without input = %s, want %s", got, want4nil)
	}
	r.StdinSHA256, r.StdinBytes = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0
	const want4 = "66a40128ed356d2715a806b15fa82931b1948111fc0f7bda5422c91cd0a0a709"
	if got := rowHash(r); got != want4 {
		t.Errorf("rowHash v4 = %s, want %s", got, want4)
	}
}

// TestRowHashSeparatesValues: values that a naive concatenation would
// confuse hash differently.
func TestRowHashSeparatesValues(t *testing.T) {
	base := func() *Run {
		r := sampleRun("x")
		finishSample(r)
		r.ChainVersion = 4
		r.Supervisor = &Supervisor{MachineID: "m", BootID: "b", PID: 10, StartTicks: 20, Namespaces: "pid:[3]"}
		r.Network = sampleNetwork(3)
		r.StdinSHA256, r.StdinBytes = "5e", 12
		return r
	}
	seen := map[string]string{}
	for name, edit := range map[string]func(*Run){
		"base":               func(*Run) {},
		"exit code nil":      func(r *Run) { r.ExitCode = nil },
		"exit code 0":        func(r *Run) { r.ExitCode = intp(0) },
		"code nil":           func(r *Run) { r.Code = nil },
		"code empty":         func(r *Run) { r.Code = strp("") },
		"policy moved":       func(r *Run) { r.Policy, r.PolicySHA256 = "stric", "t"+r.PolicySHA256 },
		"label moved":        func(r *Run) { r.Labels = map[string]string{"team": "mljob", "": "42"} },
		"violation moved":    func(r *Run) { r.Violations = r.Violations[:1] },
		"violations swapped": func(r *Run) { r.Violations[0], r.Violations[1] = r.Violations[1], r.Violations[0] },
		"head byte moved": func(r *Run) {
			n := len(r.StdoutHead) - 1
			r.StdoutHead, r.StderrHead = r.StdoutHead[:n], append([]byte{r.StdoutHead[n]}, r.StderrHead...)
		},
		"truncated": func(r *Run) { r.StderrTruncated = true },
		"seq":       func(r *Run) { r.Seq++ },
		"prev":      func(r *Run) { r.PrevHash = strings.Repeat("1", 64) },
		"start":     func(r *Run) { r.Start = r.Start.Add(1) },
		"reason":    func(r *Run) { r.Reason = "supervisor died" },
		"reason moved": func(r *Run) {
			r.NsboxVersion, r.Reason = "v1.2", ".3"
		},
		"no supervisor": func(r *Run) { r.Supervisor = nil },
		"other pid":     func(r *Run) { r.Supervisor.PID++ },
		"other start":   func(r *Run) { r.Supervisor.StartTicks++ },
		"other boot":    func(r *Run) { r.Supervisor.BootID = "x" },
		"other machine": func(r *Run) { r.Supervisor.MachineID = "x" },
		"machine moved": func(r *Run) { r.Supervisor.MachineID, r.Supervisor.BootID = "mb", "" },
		"other ns":      func(r *Run) { r.Supervisor.Namespaces = "pid:[1]" },
		"encoding 1":    func(r *Run) { r.ChainVersion, r.Supervisor = 1, nil },
		"encoding 2":    func(r *Run) { r.ChainVersion = 2 },
		"encoding 3":    func(r *Run) { r.ChainVersion = 3 },
		"no stdin":      func(r *Run) { r.StdinSHA256, r.StdinBytes = "", 0 },
		"stdin length":  func(r *Run) { r.StdinBytes++ },
		"stdin digest":  func(r *Run) { r.StdinSHA256 = "5f" },
		"no network":    func(r *Run) { r.Network = nil },
		"no connections": func(r *Run) {
			r.Network.Connections = nil
		},
		"bare network": func(r *Run) {
			r.Network = &result.Network{Mode: result.NetworkAllowlist, Connections: []result.Connection{}}
		},
		"mode":       func(r *Run) { r.Network.Mode = "none" },
		"proxy":      func(r *Run) { r.Network.Proxy = "127.0.0.1:8080" },
		"mode moved": func(r *Run) { r.Network.Mode, r.Network.Proxy = "allowlist127.0.0.1", ":3128" },
		"dropped":    func(r *Run) { r.Network.ConnectionsDropped++ },
		"refused":    func(r *Run) { r.Network.Refused++ },
		"sent":       func(r *Run) { r.Network.BytesSent++ },
		"received":   func(r *Run) { r.Network.BytesReceived++ },
		"sent and received": func(r *Run) {
			r.Network.BytesSent, r.Network.BytesReceived = r.Network.BytesReceived, r.Network.BytesSent
		},
		"connection removed":    func(r *Run) { r.Network.Connections = r.Network.Connections[:2] },
		"connections swapped":   func(r *Run) { c := r.Network.Connections; c[0], c[1] = c[1], c[0] },
		"host":                  func(r *Run) { r.Network.Connections[0].Host = "api0.example.org" },
		"host moved to address": func(r *Run) { c := &r.Network.Connections[0]; c.Host, c.Address = "api0.example.com192.0.2.1:443", "" },
		"port":                  func(r *Run) { r.Network.Connections[0].Port = 444 },
		"method":                func(r *Run) { r.Network.Connections[0].Method = result.ConnectHTTP },
		"address":               func(r *Run) { r.Network.Connections[0].Address = "192.0.2.9:443" },
		"allowed":               func(r *Run) { r.Network.Connections[2].Allowed = true },
		"connection reason":     func(r *Run) { r.Network.Connections[0].Reason = "limit" },
		"connection sent":       func(r *Run) { r.Network.Connections[0].BytesSent++ },
		"connection received":   func(r *Run) { r.Network.Connections[0].BytesReceived++ },
		"connection start":      func(r *Run) { r.Network.Connections[1].StartMS++ },
		"connection duration":   func(r *Run) { r.Network.Connections[1].DurationMS++ },
		"bytes swapped": func(r *Run) {
			c := &r.Network.Connections[1]
			c.BytesSent, c.BytesReceived = c.BytesReceived, c.BytesSent
		},
	} {
		r := base()
		edit(r)
		h := rowHash(r)
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s hash alike", name, other)
		}
		seen[h] = name
	}
	// Label order in the map does not matter.
	a, b := base(), base()
	b.Labels = map[string]string{"job": "42", "team": "ml"}
	if rowHash(a) != rowHash(b) {
		t.Error("label insertion order changed the hash")
	}
}

// chain records five runs r1..r5 and returns them, so a test can break one.
func chain(t *testing.T) (*DB, *sql.DB, []*Run) {
	t.Helper()
	db := newDB(t)
	runs := record(t, db, "r1", "r2", "r3", "r4", "r5")
	if b, err := db.Verify(); b != nil || err != nil {
		t.Fatalf("fresh chain: Verify = %v, %v", b, err)
	}
	return db, rawDB(t, db), runs
}

func TestVerifyIntact(t *testing.T) {
	db, _, runs := chain(t)
	// An unfinished row is outside the chain and breaks nothing.
	if err := db.Begin(sampleRun("open")); err != nil {
		t.Fatal(err)
	}
	v, err := db.VerifyChain()
	if err != nil {
		t.Fatal(err)
	}
	if v.Break != nil || v.Rows != 5 || v.HeadSeq != 5 || v.HeadHash != runs[4].Hash {
		t.Errorf("VerifyChain = %+v, want 5 rows, head %s", v, runs[4].Hash)
	}
	for i, r := range runs {
		if r.Seq != int64(i+1) {
			t.Errorf("%s seq %d, want %d", r.ID, r.Seq, i+1)
		}
		if i > 0 && r.PrevHash != runs[i-1].Hash {
			t.Errorf("%s prev_hash %s, want %s", r.ID, r.PrevHash, runs[i-1].Hash)
		}
	}
}

func TestVerifyEmpty(t *testing.T) {
	v, err := newDB(t).VerifyChain()
	if err != nil || v.Break != nil || v.Rows != 0 || v.HeadHash != genesisHash {
		t.Errorf("VerifyChain of an empty log = %+v, %v", v, err)
	}
}

// TestVerifyFindsEdits edits one thing of r3 (or removes a row) with raw
// SQL and checks that Verify names the first row that no longer fits.
func TestVerifyFindsEdits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sql    string // %s is r3's id unless noted
		seq    int64  // the row Verify must name
		id     string
		reason string // a word of the reason
	}{
		{"status", `UPDATE runs SET status = 'ok' WHERE id = '%s'`, 3, "r3", "edited"},
		{"exit code", `UPDATE runs SET exit_code = 0 WHERE id = '%s'`, 3, "r3", "edited"},
		{"exit code NULL", `UPDATE runs SET exit_code = NULL WHERE id = '%s'`, 3, "r3", "edited"},
		{"exit code text", `UPDATE runs SET exit_code = 'zero' WHERE id = '%s'`, 3, "r3", "exit_code"},
		{"stdout head", `UPDATE runs SET stdout_head = x'00' WHERE id = '%s'`, 3, "r3", "edited"},
		{"stdout head one byte", `UPDATE runs SET stdout_head = substr(stdout_head, 1, length(stdout_head) - 1) WHERE id = '%s'`, 3, "r3", "edited"},
		{"code", `UPDATE runs SET code = 'print(1)' WHERE id = '%s'`, 3, "r3", "edited"},
		{"code removed", `UPDATE runs SET code = NULL WHERE id = '%s'`, 3, "r3", "edited"},
		{"start", `UPDATE runs SET start_ns = start_ns + 1 WHERE id = '%s'`, 3, "r3", "edited"},
		{"duration", `UPDATE runs SET duration_ms = 1 WHERE id = '%s'`, 3, "r3", "edited"},
		{"policy hash", `UPDATE runs SET policy_sha256 = 'ff' WHERE id = '%s'`, 3, "r3", "edited"},
		{"version", `UPDATE runs SET nsbox_version = 'v9' WHERE id = '%s'`, 3, "r3", "edited"},
		{"violation name", `UPDATE run_violations SET name = 'math' WHERE run_id = '%s' AND idx = 0`, 3, "r3", "edited"},
		{"violation detail", `UPDATE run_violations SET detail = '' WHERE run_id = '%s' AND idx = 1`, 3, "r3", "edited"},
		{"violation removed", `DELETE FROM run_violations WHERE run_id = '%s' AND idx = 1`, 3, "r3", "edited"},
		{"first violation removed", `DELETE FROM run_violations WHERE run_id = '%s' AND idx = 0`, 3, "r3", "idx"},
		{"violations removed", `DELETE FROM run_violations WHERE run_id = '%s'`, 3, "r3", "edited"},
		{"violation added", `INSERT INTO run_violations VALUES ('%s', 2, 'import', 'sys', 1, 0, '')`, 3, "r3", "edited"},
		{"label value", `UPDATE run_labels SET value = 'ops' WHERE run_id = '%s' AND key = 'team'`, 3, "r3", "edited"},
		{"label removed", `DELETE FROM run_labels WHERE run_id = '%s' AND key = 'job'`, 3, "r3", "edited"},
		{"label added", `INSERT INTO run_labels VALUES ('%s', 'extra', '1')`, 3, "r3", "edited"},
		{"own hash", `UPDATE runs SET hash = '` + strings.Repeat("ab", 32) + `' WHERE id = '%s'`, 3, "r3", "edited"},
		{"prev hash", `UPDATE runs SET prev_hash = '` + strings.Repeat("ab", 32) + `' WHERE id = '%s'`, 3, "r3", "prev_hash"},
		{"middle row deleted", `DELETE FROM runs WHERE id = '%s'`, 4, "r4", "missing"},
		{"first row deleted", `DELETE FROM runs WHERE id = 'r1' AND '%s' != ''`, 2, "r2", "missing"},
		{"renumbered after a deletion", `DELETE FROM runs WHERE id = '%s'; UPDATE runs SET seq = seq - 1 WHERE seq > 3`, 3, "r4", "prev_hash"},
		{"taken out of the chain", `UPDATE runs SET seq = NULL WHERE id = '%s'`, 4, "r4", "missing"},
		{"last taken out of the chain", `UPDATE runs SET seq = NULL WHERE id = 'r5' AND '%s' != ''`, 0, "r5", "not in the chain"},
		{"reason", `UPDATE runs SET reason = 'supervisor died' WHERE id = '%s'`, 3, "r3", "edited"},
		{"supervisor pid", `UPDATE runs SET supervisor_pid = supervisor_pid + 1 WHERE id = '%s'`, 3, "r3", "edited"},
		{"supervisor boot", `UPDATE runs SET supervisor_boot_id = 'other' WHERE id = '%s'`, 3, "r3", "edited"},
		{"supervisor machine", `UPDATE runs SET supervisor_machine_id = 'other' WHERE id = '%s'`, 3, "r3", "edited"},
		{"supervisor removed", `UPDATE runs SET supervisor_machine_id = NULL, supervisor_boot_id = NULL, supervisor_pid = NULL,
			supervisor_start_ticks = NULL, supervisor_ns = NULL WHERE id = '%s'`, 3, "r3", "edited"},
		{"supervisor partly NULL", `UPDATE runs SET supervisor_pid = NULL WHERE id = '%s'`, 3, "r3", "partly NULL"},
		{"downgraded to encoding 1", `UPDATE runs SET chain_version = 1 WHERE id = '%s'`, 3, "r3", "encoding 1"},
		{"downgraded and stripped", `UPDATE runs SET chain_version = 1, reason = '', supervisor_machine_id = NULL, supervisor_boot_id = NULL, supervisor_pid = NULL,
			supervisor_start_ticks = NULL, supervisor_ns = NULL WHERE id = '%s'`, 3, "r3", "edited"},
		{"unknown encoding", `UPDATE runs SET chain_version = 5 WHERE id = '%s'`, 3, "r3", "chain_version 5"},
		{"stdin added", `UPDATE runs SET stdin_sha256 = 'ab', stdin_bytes = 1 WHERE id = '%s'`, 3, "r3", "edited"},
		{"stdin length", `UPDATE runs SET stdin_bytes = 7 WHERE id = '%s'`, 3, "r3", "edited"},
		{"downgraded to encoding 3", `UPDATE runs SET chain_version = 3 WHERE id = '%s'`, 3, "r3", "edited"},
		{"stdin on an encoding-3 row", `UPDATE runs SET chain_version = 3, stdin_bytes = 5 WHERE id = '%s'`, 3, "r3", "encoding 3"},
		{"connection host", `UPDATE run_connections SET host = 'api0.example.org' WHERE run_id = '%s' AND idx = 0`, 3, "r3", "edited"},
		{"connection bytes", `UPDATE run_connections SET bytes_received = 0 WHERE run_id = '%s' AND idx = 1`, 3, "r3", "edited"},
		{"connection allowed", `UPDATE run_connections SET allowed = 1 WHERE run_id = '%s' AND idx = 2`, 3, "r3", "edited"},
		{"connection allowed 2", `UPDATE run_connections SET allowed = 2 WHERE run_id = '%s' AND idx = 0`, 3, "r3", "0 or 1"},
		{"connection port text", `UPDATE run_connections SET port = 'https' WHERE run_id = '%s' AND idx = 0`, 3, "r3", "port"},
		{"last connection removed", `DELETE FROM run_connections WHERE run_id = '%s' AND idx = 2`, 3, "r3", "edited"},
		{"first connection removed", `DELETE FROM run_connections WHERE run_id = '%s' AND idx = 0`, 3, "r3", "idx"},
		{"connections removed", `DELETE FROM run_connections WHERE run_id = '%s'`, 3, "r3", "edited"},
		{"connection added", `INSERT INTO run_connections VALUES ('%s', 3, 'x.example', 443, 'CONNECT', '', 0, 'no', 0, 0, 0, 0)`, 3, "r3", "edited"},
		{"connections moved", `UPDATE run_connections SET run_id = 'r2', idx = idx + 3 WHERE run_id = '%s'`, 2, "r2", "edited"},
		{"network totals", `UPDATE runs SET net_bytes_sent = 0 WHERE id = '%s'`, 3, "r3", "edited"},
		{"network refused", `UPDATE runs SET net_refused = 0 WHERE id = '%s'`, 3, "r3", "edited"},
		{"network mode", `UPDATE runs SET network = '' WHERE id = '%s'`, 3, "r3", "edited"},
		{"network removed", `UPDATE runs SET network = '', net_proxy = '', net_refused = 0, net_bytes_sent = 0, net_bytes_received = 0
			WHERE id = '%s'; DELETE FROM run_connections WHERE run_id = 'r3'`, 3, "r3", "edited"},
		{"downgraded to encoding 2", `UPDATE runs SET chain_version = 2 WHERE id = '%s'`, 3, "r3", "encoding 2"},
		// Rows beside the chain: side-table rows of no chained run, and the schema.
		{"violation of no run", `INSERT INTO run_violations VALUES ('ghost', 0, 'import', 'os', 1, 0, '') -- %s`, 0, "ghost", "violation row of run ghost"},
		{"violation of an unchained run", `INSERT INTO runs (id, start_ns, status, policy, policy_sha256, root_manifest_sha256, code_sha256, nsbox_version)
			VALUES ('loose', 1, 'unfinished', 'p', '', '', '', 'v'); INSERT INTO run_violations VALUES ('loose', 0, 'import', 'os', 1, 0, '') -- %s`, 0, "loose", "not in the chain"},
		{"label of no run", `INSERT INTO run_labels VALUES ('ghost', 'team', 'ml') -- %s`, 0, "ghost", "label row"},
		{"connection of no run", `INSERT INTO run_connections VALUES ('ghost', 0, 'x.example', 443, 'CONNECT', '', 0, 'no', 0, 0, 0, 0) -- %s`, 0, "ghost", "connection row"},
		{"schema version removed", `DELETE FROM schema_version WHERE version = 4 -- %s`, 0, "", "version table was edited"},
		{"schema version added", `INSERT INTO schema_version VALUES (5, 0) -- %s`, 0, "", "version table was edited"},
		{"trigger added", `CREATE TRIGGER hide AFTER INSERT ON run_violations BEGIN DELETE FROM run_violations WHERE run_id = NEW.run_id; END -- %s`, 0, "", "trigger hide is not part"},
		{"view added", `CREATE VIEW v AS SELECT id FROM runs -- %s`, 0, "", "view v is not part"},
		{"index dropped", `DROP INDEX run_connections_host -- %s`, 0, "", "index run_connections_host is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, raw, _ := chain(t)
			if _, err := raw.Exec(fmt.Sprintf(tc.sql, "r3")); err != nil {
				t.Fatal(err)
			}
			b, err := db.Verify()
			if err != nil {
				t.Fatal(err)
			}
			if b == nil {
				t.Fatal("Verify found the chain intact")
			}
			t.Logf("break: %s", b)
			if b.Seq != tc.seq || b.ID != tc.id || !strings.Contains(b.Reason, tc.reason) {
				t.Errorf("Verify = %+v, want seq %d id %s, a reason with %q", b, tc.seq, tc.id, tc.reason)
			}
		})
	}
}

// TestVerifyFindsRewrite: an edit whose author also recomputed the row's
// hash is found at the next row, whose prev_hash no longer matches.
func TestVerifyFindsRewrite(t *testing.T) {
	db, raw, runs := chain(t)
	r3 := runs[2]
	r3.Status = "ok"
	if _, err := raw.Exec(`UPDATE runs SET status = ?, hash = ? WHERE id = ?`, r3.Status, rowHash(r3), r3.ID); err != nil {
		t.Fatal(err)
	}
	b, err := db.Verify()
	if err != nil || b == nil || b.Seq != 4 || b.ID != "r4" {
		t.Errorf("Verify = %+v, %v; want seq 4 (r4)", b, err)
	}
}

// TestFinishAfterBreak: the chain keeps growing from the stored head; the
// break stays reported where it is.
func TestFinishAfterBreak(t *testing.T) {
	db, raw, _ := chain(t)
	if _, err := raw.Exec(`UPDATE runs SET status = 'ok' WHERE id = 'r2'`); err != nil {
		t.Fatal(err)
	}
	record(t, db, "r6")
	b, err := db.Verify()
	if err != nil || b == nil || b.ID != "r2" {
		t.Errorf("Verify = %+v, %v; want r2", b, err)
	}
}
