package tests

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nsbox/nsbox/sandbox/result"
)

// auditRows exports the audit log at db as JSON objects.
func auditRows(t *testing.T, db string) []map[string]any {
	t.Helper()
	o := nsbox(t, run{args: []string{"audit", "export", "--format", "jsonl", "--audit-db", db}})
	if o.exit != 0 {
		t.Fatalf("audit export: exit %d: %s", o.exit, o.stderr)
	}
	var rows []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(o.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		rows = append(rows, m)
	}
	return rows
}

// TestAuditFiftyParallelRuns: 50 runs at once into one audit log give 50
// finished rows, with their labels, and an intact hash chain.
func TestAuditFiftyParallelRuns(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := nsbox(t, run{auditDB: db, args: []string{"run", "--json", "--policy", "strict", "--label", fmt.Sprintf("n=%d", i), "-c", "print(6*7)"}})
			if o.res == nil || o.res.Status != result.StatusOK {
				t.Errorf("run %d: %+v %s", i, o.res, o.stderr)
			}
		}()
	}
	wg.Wait()
	rows := auditRows(t, db)
	labels := map[string]bool{}
	for _, r := range rows {
		if r["status"] != "ok" {
			t.Errorf("row %v: status %v", r["id"], r["status"])
		}
		if l, ok := r["labels"].(map[string]any); ok {
			labels[fmt.Sprint(l["n"])] = true
		}
	}
	if len(rows) != 50 || len(labels) != 50 {
		t.Errorf("%d rows with %d distinct labels, want 50 and 50", len(rows), len(labels))
	}
	if v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}}); v.exit != 0 {
		t.Errorf("audit verify: exit %d: %s%s", v.exit, v.stdout, v.stderr)
	}
}

// TestAuditRecordsRunAndDetectsEdits: a run's row holds what the result
// said (status, code hash, stored code under strict, violations, the first
// KiB of output); editing a
// finished row makes `audit verify` name it. (The killed supervisor's
// row: TestAuditKilledRunFinishedByNextRun.)
func TestAuditRecordsRunAndDetectsEdits(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	o := nsbox(t, run{auditDB: db, args: []string{"run", "--json", "--policy", "strict", "-c", "print('x' * 5000)"}})
	o.wantStatus(t, result.StatusOK)
	nsbox(t, run{auditDB: db, args: []string{"run", "--json", "--policy", "strict", "-c", "import os"}}).wantStatus(t, result.StatusPolicyViolation)
	rows := auditRows(t, db)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %v", len(rows), rows)
	}
	first := rows[0]
	if first["id"] != o.res.ID || first["status"] != "ok" || first["code"] != "print('x' * 5000)" ||
		len(fmt.Sprint(first["stdout_head"])) != 1024 || first["stdout_bytes"] != float64(5001) {
		t.Errorf("first row %v does not match the run", first)
	}
	if v, _ := rows[1]["violations"].([]any); len(v) != 1 {
		t.Errorf("second row violations %v, want the import of os", rows[1]["violations"])
	}

	// Edit the first finished row behind nsbox's back.
	sqldb, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqldb.Exec(`UPDATE runs SET status = 'error' WHERE id = ?`, o.res.ID); err != nil {
		t.Fatal(err)
	}
	sqldb.Close()
	v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}})
	if v.exit != 1 || !strings.Contains(string(v.stdout)+string(v.stderr), o.res.ID) {
		t.Errorf("audit verify after an edit: exit %d, output %s%s; want exit 1 naming %s", v.exit, v.stdout, v.stderr, o.res.ID)
	}
}

// sleeperCode signals readiness in /workspace, then sleeps: a run that is
// still going when the test acts.
func sleeperCode(d time.Duration) string {
	return fmt.Sprintf("import time\nopen('/workspace/ready', 'w').close()\ntime.sleep(%g)\nprint('done')\n", d.Seconds())
}

// rawRun reads a row straight from the database, not through nsbox (whose
// audit commands finish orphaned rows first).
type rawRun struct {
	id, status, reason string
	seq, chainVersion  sql.NullInt64
	startNS, endNS     sql.NullInt64
}

func rawRuns(t *testing.T, db string) map[string]rawRun {
	t.Helper()
	sqldb, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	rows, err := sqldb.Query(`SELECT id, status, reason, seq, chain_version, start_ns, end_ns FROM runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]rawRun{}
	for rows.Next() {
		var r rawRun
		if err := rows.Scan(&r.id, &r.status, &r.reason, &r.seq, &r.chainVersion, &r.startNS, &r.endNS); err != nil {
			t.Fatal(err)
		}
		out[r.id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// killMidRun starts a run that sleeps, SIGKILLs its nsbox once the program
// runs, waits for it, and returns the id of the row it left: unfinished,
// as nothing has finished it yet.
func killMidRun(t *testing.T, db, state string) string {
	t.Helper()
	ws := sandboxWorkspace(t)
	nsbox(t, run{
		auditDB: db,
		state:   state,
		args:    []string{"run", "--policy", osOnly(t, "default"), "--workspace", ws, "--label", "who=killed", "-c", sleeperCode(30 * time.Second)},
		whileRuns: func(p *os.Process) {
			if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
				t.Errorf("payload never got ready")
			}
			p.Kill()
		},
	})
	rows := rawRuns(t, db)
	if len(rows) != 1 {
		t.Fatalf("rows %v, want the killed run's", rows)
	}
	for id, r := range rows {
		if r.status != "unfinished" || r.seq.Valid {
			t.Fatalf("the killed run's row right after the kill: %+v, want unfinished", r)
		}
		return id
	}
	panic("unreachable")
}

// wantReaped checks that the killed run's row is finished as killed by a
// dead supervisor, ending after it started and before now, in the chain,
// and that the chain verifies with nothing left to finish.
func wantReaped(t *testing.T, db, id string) {
	t.Helper()
	r := rawRuns(t, db)[id]
	if r.status != "killed" || r.reason != "supervisor died" || !r.seq.Valid || r.chainVersion.Int64 != 4 ||
		!r.endNS.Valid || r.endNS.Int64 < r.startNS.Int64 || r.endNS.Int64 > time.Now().UnixNano() {
		t.Errorf("the killed run's row: %+v, want killed, reason \"supervisor died\", chained, ended after its start", r)
	}
	v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}})
	if v.exit != 0 || len(v.stderr) != 0 {
		t.Errorf("audit verify: exit %d: %s%s; want the chain intact and nothing left to finish", v.exit, v.stdout, v.stderr)
	}
}

// TestAuditKilledRunFinishedByNextRun: SIGKILL to nsbox mid-run leaves its
// row unfinished; the next nsbox run (from another state directory, on the
// same log) finishes it as killed with reason "supervisor died", and the
// chain verifies.
func TestAuditKilledRunFinishedByNextRun(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	state := t.TempDir()
	id := killMidRun(t, db, state)
	o := nsbox(t, run{auditDB: db, args: []string{"run", "--json", "-c", "pass"}})
	o.wantStatus(t, result.StatusOK)
	if len(o.stderr) != 0 {
		t.Errorf("the next run wrote %q to stderr", o.stderr)
	}
	wantReaped(t, db, id)
	if r := rawRuns(t, db)[o.res.ID]; r.status != "ok" || r.reason != "" {
		t.Errorf("the next run's own row: %+v", r)
	}
	// A later run of the same state dir sweeps the killed run's cgroup.
	nsbox(t, run{state: state, args: []string{"run", "--json", "-c", "pass"}}).wantStatus(t, result.StatusOK)
}

// TestAuditKilledRunFinishedByAuditList: `nsbox audit list` finishes the
// killed run's row before it lists it, lists it as killed with the reason,
// and says so on stderr.
func TestAuditKilledRunFinishedByAuditList(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	state := t.TempDir()
	id := killMidRun(t, db, state)
	o := nsbox(t, run{args: []string{"audit", "list", "--json", "--audit-db", db}})
	var listed []map[string]any
	if err := json.Unmarshal(o.stdout, &listed); o.exit != 0 || err != nil {
		t.Fatalf("audit list: exit %d, %v: %s%s", o.exit, err, o.stdout, o.stderr)
	}
	if len(listed) != 1 || listed[0]["id"] != id || listed[0]["status"] != "killed" || listed[0]["reason"] != "supervisor died" {
		t.Errorf("audit list = %v, want %s killed, reason \"supervisor died\"", listed, id)
	}
	if !strings.Contains(string(o.stderr), "1 unfinished run(s) whose supervisor died are now finished as killed") {
		t.Errorf("audit list stderr %q does not say it finished the row", o.stderr)
	}
	wantReaped(t, db, id)
	nsbox(t, run{state: state, args: []string{"run", "--json", "-c", "pass"}}).wantStatus(t, result.StatusOK)
}

// TestAuditLiveRunNotFinished: while a run is going, another run (another
// state directory, the same log) and the audit commands leave its row
// alone; the run then finishes its own row with its own status.
func TestAuditLiveRunNotFinished(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	ws := sandboxWorkspace(t)
	o := nsbox(t, run{
		auditDB: db,
		args:    []string{"run", "--json", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", sleeperCode(3 * time.Second)},
		whileRuns: func(p *os.Process) {
			if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
				t.Errorf("payload never got ready")
			}
			nsbox(t, run{auditDB: db, args: []string{"run", "--json", "-c", "pass"}}).wantStatus(t, result.StatusOK)
			for _, args := range [][]string{{"list"}, {"stats"}, {"verify"}, {"export"}} {
				a := nsbox(t, run{args: append(append([]string{"audit"}, args...), "--audit-db", db)})
				if a.exit != 0 || len(a.stderr) != 0 {
					t.Errorf("audit %v while a run is going: exit %d, stderr %q", args, a.exit, a.stderr)
				}
			}
			unfinished := 0
			for _, r := range rawRuns(t, db) {
				if r.status == "unfinished" {
					unfinished++
				}
			}
			if unfinished != 1 {
				t.Errorf("%d unfinished rows while the run is going, want its own", unfinished)
			}
		},
	})
	o.wantStatus(t, result.StatusOK)
	if len(o.stderr) != 0 {
		t.Errorf("the run wrote %q to stderr (its row finished by someone else?)", o.stderr)
	}
	if r := rawRuns(t, db)[o.res.ID]; r.status != "ok" || r.reason != "" || !r.seq.Valid {
		t.Errorf("the run's row %+v, want finished ok by itself", r)
	}
	if v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}}); v.exit != 0 {
		t.Errorf("audit verify: exit %d: %s%s", v.exit, v.stdout, v.stderr)
	}
}

// TestUnrecordableRunNeverStarts: the audit row is written while the
// sandbox is built, and the program is held back until it is; when it
// cannot be written the program never runs (its canary stays absent) and
// the run is a sandbox_error of step audit.
func TestUnrecordableRunNeverStarts(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	o := nsbox(t, run{
		args:    []string{"run", "--json", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", "open('/workspace/canary', 'w').write('ran')"},
		auditDB: "/proc/nsbox-no-such/audit.db",
	})
	o.wantStatus(t, result.StatusSandboxError)
	if o.res.Error == nil || o.res.Error.Step != "audit" || !strings.Contains(o.res.Error.Message, "/proc/nsbox-no-such") {
		t.Errorf("error %+v, want step audit naming the log", o.res.Error)
	}
	if _, err := os.Stat(filepath.Join(ws, "canary")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran although its run could not be recorded (canary: %v)", err)
	}
	o.noLeftovers(t)
}
