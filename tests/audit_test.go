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
// unfinished row: TestAuditUnfinishedAfterKill.)
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

// TestAuditUnfinishedAfterKill: SIGKILL to nsbox mid-run leaves the run's
// row marked unfinished, not missing.
func TestAuditUnfinishedAfterKill(t *testing.T) {
	needRoot(t)
	db := filepath.Join(t.TempDir(), "audit.db")
	ws := sandboxWorkspace(t)
	state := t.TempDir()
	nsbox(t, run{
		auditDB: db,
		state:   state,
		args:    []string{"run", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", escapeCode(true)},
		whileRuns: func(p *os.Process) {
			if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
				t.Errorf("payload never got ready")
			}
			p.Kill()
		},
	})
	rows := auditRows(t, db)
	if len(rows) != 1 || rows[0]["status"] != "unfinished" {
		t.Errorf("rows %v, want one unfinished", rows)
	}
	// A later run of the same state dir sweeps the killed run's cgroup.
	nsbox(t, run{state: state, args: []string{"run", "--json", "-c", "pass"}}).wantStatus(t, result.StatusOK)
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
