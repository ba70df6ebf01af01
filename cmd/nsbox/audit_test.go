package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/result"
)

// runAudit runs `nsbox audit ARGS...` and returns its output and the exit
// status main would give it.
func runAudit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, _, code := runAuditErr(t, args...)
	return out, code
}

// runAuditErr is runAudit that also returns what the command wrote to
// stderr.
func runAuditErr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:           "nsbox",
		Commands:       []*cli.Command{auditCommand()},
		Writer:         &out,
		ErrWriter:      &errOut,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	code := 0
	if err := app.Run(append([]string{"nsbox", "audit"}, args...)); err != nil {
		code = exitCode(err)
		t.Logf("audit %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// auditFixture is a log of three finished runs and one unfinished:
//
//	id                        status      labels            violations
//	aaaa0001 (2h ago)         ok          team=ml           -
//	aaaa0002 (10m ago)        error       team=ml job=a,b   import os, event "\x1b[2J"
//	bbbb0003 (1m ago)         timeout     team=ops          -
//	cccc0004 (now)            unfinished  -                 -
func auditFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	db, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	add := func(id string, ago time.Duration, status result.Status, labels map[string]string, vs ...result.Violation) {
		r := &audit.Run{ID: id, Start: now.Add(-ago), Policy: "strict", Labels: labels, NsboxVersion: "test",
			Code: auditStrPtr("print(1)\n"), CodeSHA256: "c0de"}
		if err := db.Begin(r); err != nil {
			t.Fatal(err)
		}
		if status == "" {
			return
		}
		r.Status, r.Violations, r.DurationMS = string(status), vs, 250
		r.ExitCode = auditIntPtr(0)
		r.StdoutHead, r.StdoutBytes = []byte("1\n"), 2
		if err := db.Finish(r); err != nil {
			t.Fatal(err)
		}
	}
	add("aaaa0001", 2*time.Hour, result.StatusOK, map[string]string{"team": "ml"})
	add("aaaa0002", 10*time.Minute, result.StatusError, map[string]string{"team": "ml", "job": "a,b"},
		result.Violation{Kind: result.ViolationImport, Name: "os", Line: 1, Detail: "import of os denied"},
		result.Violation{Kind: result.ViolationEvent, Name: "\x1b[2J", Line: 2, Detail: "clears your screen"})
	add("bbbb0003", time.Minute, result.StatusTimeout, map[string]string{"team": "ops"})
	add("cccc0004", 0, "", nil)
	return path
}

func auditStrPtr(s string) *string { return &s }
func auditIntPtr(i int) *int       { return &i }

// auditListIDs runs audit list --json with args and returns the ids listed.
func auditListIDs(t *testing.T, db string, args ...string) []string {
	t.Helper()
	out, code := runAudit(t, append([]string{"list", "--json", "--audit-db", db}, args...)...)
	if code != 0 {
		t.Fatalf("list %v: exit %d", args, code)
	}
	var runs []map[string]any
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("list --json %v: %v\n%s", args, err, out)
	}
	ids := []string{}
	for _, r := range runs {
		ids = append(ids, r["id"].(string))
	}
	return ids
}

func TestAuditList(t *testing.T) {
	db := auditFixture(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"cccc0004", "bbbb0003", "aaaa0002", "aaaa0001"}},
		{[]string{"--since", "1h"}, []string{"cccc0004", "bbbb0003", "aaaa0002"}},
		{[]string{"--status", "error"}, []string{"aaaa0002"}},
		{[]string{"--status", "unfinished"}, []string{"cccc0004"}},
		{[]string{"--violations"}, []string{"aaaa0002"}},
		{[]string{"--label", "team=ml"}, []string{"aaaa0002", "aaaa0001"}},
		{[]string{"--label", "team=ml", "--label", "job=a,b"}, []string{"aaaa0002"}},
		{[]string{"--label", "team=nobody"}, []string{}},
		{[]string{"--limit", "2"}, []string{"cccc0004", "bbbb0003"}},
	} {
		if got := auditListIDs(t, db, tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("list %v = %v, want %v", tc.args, got, tc.want)
		}
	}
	if _, code := runAudit(t, "list", "--audit-db", db, "--label", "novalue"); code != 125 {
		t.Errorf("list --label novalue: exit %d, want 125", code)
	}
}

func TestAuditListTable(t *testing.T) {
	db := auditFixture(t)
	out, code := runAudit(t, "list", "--audit-db", db)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	t.Log("\n" + out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want a header and 4 runs", len(lines))
	}
	// Aligned: every column starts at the header's offset.
	header := lines[0]
	for _, col := range []string{"DURATION", "STATUS", "EXIT", "VIOLATIONS"} {
		at := strings.Index(header, col)
		for _, l := range lines[1:] {
			if at >= len(l) || l[at] == ' ' || l[at-1] != ' ' {
				t.Errorf("column %s not aligned in %q", col, l)
			}
		}
	}
	if f := strings.Fields(lines[3]); f[0] != "aaaa0002" || f[5] != "error" || f[7] != "2" {
		t.Errorf("row %q", lines[3])
	}
	if f := strings.Fields(lines[1]); f[0] != "cccc0004" || f[3] != "-" || f[5] != "unfinished" {
		t.Errorf("unfinished row %q", lines[1])
	}
	if out, _ := runAudit(t, "list", "--audit-db", db, "--limit", "2"); !strings.Contains(out, "the newest 2 runs") {
		t.Errorf("a table cut at --limit does not say so:\n%s", out)
	}
}

func TestAuditShow(t *testing.T) {
	db := auditFixture(t)
	out, code := runAudit(t, "show", "--audit-db", db, "aaaa0002")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	t.Log("\n" + out)
	for _, want := range []string{"status:", "error", "seq 2", "import", "os", `\x1b[2J`, "--- stdout", "--- code ---", "print(1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q", want)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("show sent an escape sequence from the run to the terminal")
	}

	out, code = runAudit(t, "show", "--json", "--audit-db", db, "bbbb")
	if code != 0 {
		t.Fatalf("show by prefix: exit %d", code)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "seq", "start", "end", "duration_ms", "policy", "policy_sha256",
		"root_manifest_sha256", "code_sha256", "code", "status", "exit_code", "signal", "cpu_ms",
		"peak_memory_bytes", "stdout_bytes", "stderr_bytes", "stdout_head", "stderr_head",
		"stdout_truncated", "stderr_truncated", "violations", "labels", "nsbox_version", "prev_hash", "hash"} {
		if _, ok := r[k]; !ok {
			t.Errorf("show --json lacks %q", k)
		}
	}
	if r["id"] != "bbbb0003" || r["status"] != "timeout" || r["seq"] != float64(3) {
		t.Errorf("show --json bbbb = %v", r)
	}

	for _, args := range [][]string{{"zzzz"}, {"aaaa"}} { // none, two
		if _, code := runAudit(t, append([]string{"show", "--audit-db", db}, args...)...); code != exitNoSuchRun {
			t.Errorf("show %v: exit %d, want %d", args, code, exitNoSuchRun)
		}
	}
	if _, code := runAudit(t, "show", "--audit-db", db); code != 125 {
		t.Errorf("show without id: exit %d, want 125", code)
	}
}

func TestAuditExport(t *testing.T) {
	db := auditFixture(t)
	out, code := runAudit(t, "export", "--format", "jsonl", "--audit-db", db)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var ids []string
	var seqs []int64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r audit.Run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ids, seqs = append(ids, r.ID), append(seqs, r.Seq)
	}
	if !slices.Equal(ids, []string{"aaaa0001", "aaaa0002", "bbbb0003", "cccc0004"}) || !slices.Equal(seqs, []int64{1, 2, 3, 0}) {
		t.Errorf("export order %v seqs %v: want chain order, then the unfinished run", ids, seqs)
	}
	if _, code := runAudit(t, "export", "--format", "csv", "--audit-db", db); code != 125 {
		t.Errorf("export --format csv: exit %d, want 125", code)
	}
}

func TestAuditStats(t *testing.T) {
	db := auditFixture(t)
	out, code := runAudit(t, "stats", "--json", "--audit-db", db)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var s struct {
		Total, Unfinished int
		ByStatus          map[string]int   `json:"by_status"`
		TopImports        []map[string]any `json:"top_imports"`
		TopEvents         []map[string]any `json:"top_events"`
		SlowestPolicies   []map[string]any `json:"slowest_policies"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Total != 4 || s.Unfinished != 1 || s.ByStatus["error"] != 1 || s.ByStatus["unfinished"] != 1 {
		t.Errorf("stats %+v", s)
	}
	if len(s.TopImports) != 1 || s.TopImports[0]["name"] != "os" || s.TopImports[0]["runs"] != float64(1) {
		t.Errorf("top imports %v", s.TopImports)
	}
	if len(s.SlowestPolicies) != 1 || s.SlowestPolicies[0]["policy"] != "strict" || s.SlowestPolicies[0]["median_ms"] != float64(250) {
		t.Errorf("slowest policies %v", s.SlowestPolicies)
	}

	out, code = runAudit(t, "stats", "--audit-db", db)
	t.Log("\n" + out)
	for _, want := range []string{"Runs: 4 (1 unfinished, 0 killed as their supervisor died)", "By status:", "Most refused imports:", "Most refused audit events:", "Slowest policies:", `\x1b[2J`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("stats (exit %d) lacks %q", code, want)
		}
	}
}

func TestAuditVerify(t *testing.T) {
	db := auditFixture(t)
	out, code := runAudit(t, "verify", "--audit-db", db)
	if code != 0 || !strings.Contains(out, "intact: 3 finished runs") {
		t.Errorf("verify of an intact log: exit %d, %q", code, out)
	}
	out, code = runAudit(t, "verify", "--json", "--audit-db", db)
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("verify --json: exit %d, %v", code, err)
	}
	if v["ok"] != true || v["rows"] != float64(3) || v["head_seq"] != float64(3) || v["break"] != nil || len(v["head_hash"].(string)) != 64 {
		t.Errorf("verify --json = %v", v)
	}

	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE run_violations SET name = 'math' WHERE run_id = 'aaaa0002'`); err != nil {
		t.Fatal(err)
	}
	out, code = runAudit(t, "verify", "--audit-db", db)
	if code != exitChainBroken || !strings.Contains(out, "BROKEN at seq 2 (run aaaa0002)") {
		t.Errorf("verify of an edited log: exit %d, %q", code, out)
	}
	out, code = runAudit(t, "verify", "--json", "--audit-db", db)
	v = nil
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitChainBroken {
		t.Fatalf("verify --json of an edited log: exit %d, %v", code, err)
	}
	b, _ := v["break"].(map[string]any)
	if v["ok"] != false || b["seq"] != float64(2) || b["id"] != "aaaa0002" || b["reason"] == "" {
		t.Errorf("verify --json of an edited log = %v", v)
	}
}

// TestAuditCommandsReap: every audit command first finishes the rows whose
// supervisor died (here one begun in an earlier boot) and shows them as
// killed with the reason, while the row of a live supervisor (this test
// process's cccc0004) stays unfinished.
func TestAuditCommandsReap(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"list"}, []string{"killed", "≤", "supervisor died", "unfinished"}},
		{[]string{"list", "--json", "--status", "killed"}, []string{`"reason": "supervisor died"`, "dddd0005"}},
		{[]string{"show", "dddd0005"}, []string{"status:", "killed", "reason:", "supervisor died", "at the latest", "encoding v4"}},
		{[]string{"stats", "--json"}, []string{`"supervisor_died": 1`, `"killed": 1`, `"unfinished": 1`, `"runs": 3`}},
		{[]string{"stats"}, []string{"Runs: 5 (1 unfinished, 1 killed as their supervisor died)"}},
		{[]string{"export"}, []string{`"reason":"supervisor died"`, `"chain_version":4`}},
		{[]string{"verify"}, []string{"intact: 4 finished runs"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			db := auditFixture(t)
			d, err := audit.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			machine, _ := os.ReadFile("/etc/machine-id") // this machine's, as Begin would record it
			r := &audit.Run{ID: "dddd0005", Start: time.Now().Add(-48 * time.Hour), Policy: "strict", NsboxVersion: "test",
				Supervisor: &audit.Supervisor{MachineID: strings.TrimSpace(string(machine)), BootID: "another-boot",
					PID: 1, StartTicks: 1, Namespaces: "pid:[1]"}}
			if err := d.Begin(r); err != nil {
				t.Fatal(err)
			}
			d.Close()
			args := append([]string{tc.args[0], "--audit-db", db}, tc.args[1:]...)
			out, errOut, code := runAuditErr(t, args...)
			t.Log("\n" + out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if !strings.Contains(errOut, "1 unfinished run(s) whose supervisor died are now finished as killed") {
				t.Errorf("stderr %q does not say a row was finished", errOut)
			}
			if _, errOut, _ := runAuditErr(t, args...); errOut != "" {
				t.Errorf("a second %v wrote %q to stderr: nothing left to finish", tc.args, errOut)
			}
		})
	}
}

// TestMaxRunAgeCoversLongestRun: a row whose supervisor cannot be judged
// is taken for orphaned after audit.MaxRunAge, which must leave a margin
// over the longest wall clock a policy may set.
func TestMaxRunAgeCoversLongestRun(t *testing.T) {
	for _, k := range policies.Keys() {
		if k.Name != "limits.timeout" {
			continue
		}
		_, hi, ok := strings.Cut(k.Range(), "..")
		longest, err := time.ParseDuration(hi)
		if !ok || err != nil {
			t.Fatalf("limits.timeout range %q: %v", k.Range(), err)
		}
		if longest+30*time.Minute > audit.MaxRunAge {
			t.Errorf("limits.timeout allows %v: audit.MaxRunAge %v leaves less than 30m for the rest of a run", longest, audit.MaxRunAge)
		}
		return
	}
	t.Fatal("no limits.timeout key")
}

func TestAuditDBFromEnvironment(t *testing.T) {
	db := auditFixture(t)
	t.Setenv(audit.EnvPath, db)
	if got := auditListIDs(t, ""); len(got) != 4 {
		t.Errorf("list with $%s: %v", audit.EnvPath, got)
	}
	// The flag wins over the environment; a missing file is not created.
	other := filepath.Join(t.TempDir(), "other.db")
	if _, code := runAudit(t, "list", "--audit-db", other); code != 125 {
		t.Errorf("list --audit-db of a missing file: exit %d, want 125", code)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("list created %s", other)
	}
}

func TestAuditUsageNamesTheDatabase(t *testing.T) {
	out, _ := runAudit(t, "--help")
	for _, want := range []string{audit.DefaultPath, audit.EnvPath, "--audit-db", "list", "show", "export", "stats", "verify"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit --help lacks %q", want)
		}
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"\x1b[2J":        `\x1b[2J`,
		"tab\there":      `tab\there`,
		"bad\xffbyte":    `bad\xffbyte`,
		"back\\slash":    `back\\slash`,
		"unicode é 漢字":   "unicode é 漢字",
		"line\nbreak":    `line\nbreak`,
		"bidi\u202eflip": `bidi\u202eflip`,
	} {
		if got := auditCell(in); got != want {
			t.Errorf("auditCell(%q) = %q, want %q", in, got, want)
		}
	}
	if got := auditEscape("a\n\tb\x07", true); got != "a\n\tb\\a" {
		t.Errorf("escape keeping lines = %q", got)
	}
}
