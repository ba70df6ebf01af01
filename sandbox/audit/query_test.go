package audit

import (
	"bufio"
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// fixture is a log with known runs:
//
//	id    started   status            violations          labels
//	old   3h ago    ok                -                   team=ml
//	mid   30m ago   error             import os           team=ml job=1
//	new   1m ago    policy_violation  import os, event    team=ops
//	open  now       unfinished        -                   team=ml
func fixture(t *testing.T) *DB {
	t.Helper()
	db := newDB(t)
	now := time.Now()
	add := func(id string, ago time.Duration, status result.Status, labels map[string]string, vs ...result.Violation) {
		r := &Run{ID: id, Start: now.Add(-ago), Policy: "strict", Labels: labels, NsboxVersion: "dev"}
		if err := db.Begin(r); err != nil {
			t.Fatal(err)
		}
		if status == "" {
			return
		}
		r.Status, r.Violations = string(status), vs
		r.DurationMS = int64(len(id)) * 100
		if err := db.Finish(r); err != nil {
			t.Fatal(err)
		}
	}
	osImport := result.Violation{Kind: result.ViolationImport, Name: "os", Line: 1}
	popen := result.Violation{Kind: result.ViolationEvent, Name: "subprocess.Popen", Line: 2}
	add("old", 3*time.Hour, result.StatusOK, map[string]string{"team": "ml"})
	add("mid", 30*time.Minute, result.StatusError, map[string]string{"team": "ml", "job": "1"}, osImport)
	add("new", time.Minute, result.StatusPolicyViolation, map[string]string{"team": "ops"}, osImport, osImport, popen)
	add("open", 0, "", map[string]string{"team": "ml"})
	return db
}

func ids(runs []Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func TestListFilters(t *testing.T) {
	db := fixture(t)
	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"all, newest first", Filter{}, []string{"open", "new", "mid", "old"}},
		{"since", Filter{Since: time.Hour}, []string{"open", "new", "mid"}},
		{"status", Filter{Status: "error"}, []string{"mid"}},
		{"unfinished", Filter{Status: StatusUnfinished}, []string{"open"}},
		{"violations", Filter{Violations: true}, []string{"new", "mid"}},
		{"label", Filter{Labels: map[string]string{"team": "ml"}}, []string{"open", "mid", "old"}},
		{"labels", Filter{Labels: map[string]string{"team": "ml", "job": "1"}}, []string{"mid"}},
		{"label value", Filter{Labels: map[string]string{"team": "nobody"}}, nil},
		{"limit", Filter{Limit: 2}, []string{"open", "new"}},
		{"combined", Filter{Since: time.Hour, Violations: true, Labels: map[string]string{"team": "ml"}}, []string{"mid"}},
	} {
		runs, err := db.List(tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(runs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: List(%+v) = %v, want %v", tc.name, tc.f, got, tc.want)
		}
	}
	runs, _ := db.List(Filter{Status: "policy_violation"})
	if len(runs) != 1 || len(runs[0].Violations) != 3 || runs[0].Labels["team"] != "ops" {
		t.Errorf("List did not load violations and labels: %+v", runs)
	}
}

func TestGetPrefix(t *testing.T) {
	db := newDB(t)
	record(t, db, "abc123", "abc456", "ab", "\xff\xff")
	for _, tc := range []struct {
		id, want string
		err      error
	}{
		{"abc123", "abc123", nil},
		{"abc1", "abc123", nil},
		{"abc4", "abc456", nil},
		{"ab", "ab", nil}, // exact, though other ids extend it
		{"abc", "", ErrAmbiguous},
		{"zz", "", ErrNotFound},
		{"abc1234", "", ErrNotFound},
		{"", "", ErrNotFound},
		{"\xff", "\xff\xff", nil},
	} {
		r, err := db.Get(tc.id)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("Get(%q) = %v, want %v", tc.id, err, tc.err)
		case tc.err == nil && (err != nil || r.ID != tc.want):
			t.Errorf("Get(%q) = %v, %v; want %s", tc.id, r, err, tc.want)
		}
	}
}

// TestExport: one JSON object per line, finished runs in chain order, then
// unfinished ones; each line carries everything hashed, exactly, so the
// chain can be checked from the export alone.
func TestExport(t *testing.T) {
	db := newDB(t)
	want := record(t, db, "e1", "e2", "e3")
	if err := db.Begin(sampleRun("e4")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := db.Export(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	var got []*Run
	for sc.Scan() {
		var r Run
		if err := r.UnmarshalJSON(sc.Bytes()); err != nil {
			t.Fatalf("line %d: %v: %s", len(got)+1, err, sc.Text())
		}
		got = append(got, &r)
	}
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4", len(got))
	}
	prev := genesisHash
	for i, r := range got[:3] {
		if err := sameRun(r, want[i]); err != nil {
			t.Errorf("line %d: %v", i+1, err)
		}
		if r.PrevHash != prev || rowHash(r) != r.Hash {
			t.Errorf("line %d: the chain does not check from the export", i+1)
		}
		prev = r.Hash
	}
	if got[3].ID != "e4" || got[3].Status != StatusUnfinished || got[3].Seq != 0 {
		t.Errorf("last line %+v, want the unfinished e4", got[3])
	}
	for _, key := range []string{`"stderr_head_base64":`, `"code_base64":`, `"prev_hash":"` + genesisHash, `"seq":1,`} {
		if !strings.Contains(text, key) {
			t.Errorf("export lacks %s", key)
		}
	}
}

func TestStats(t *testing.T) {
	db := fixture(t)
	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 4 || s.Unfinished != 1 {
		t.Errorf("total %d unfinished %d, want 4 and 1", s.Total, s.Unfinished)
	}
	for status, n := range map[string]int{"ok": 1, "error": 1, "policy_violation": 1, StatusUnfinished: 1} {
		if s.ByStatus[status] != n {
			t.Errorf("by status %s = %d, want %d", status, s.ByStatus[status], n)
		}
	}
	if !slices.Equal(s.TopImports, []Count{{Name: "os", Runs: 2, Times: 3}}) {
		t.Errorf("top imports %+v", s.TopImports)
	}
	if !slices.Equal(s.TopEvents, []Count{{Name: "subprocess.Popen", Runs: 1, Times: 1}}) {
		t.Errorf("top events %+v", s.TopEvents)
	}
	// Three finished strict runs of 300ms ("old", "mid", "new").
	if !slices.Equal(s.SlowestPolicies, []PolicyTime{{Policy: "strict", Runs: 3, MedianMS: 300, P95MS: 300, MaxMS: 300}}) {
		t.Errorf("slowest policies %+v", s.SlowestPolicies)
	}
}

func TestStatsPolicyOrder(t *testing.T) {
	db := newDB(t)
	durations := map[string][]int64{"fast": {1, 2, 3}, "slow": {10, 500, 20, 30}, "spiky": {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 900}}
	n := 0
	for policy, ds := range durations {
		for _, d := range ds {
			n++
			r := &Run{ID: policy + string(rune('a'+n)), Start: time.Now(), Policy: policy, Status: "ok", DurationMS: d}
			if err := db.Finish(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := []PolicyTime{
		{Policy: "slow", Runs: 4, MedianMS: 20, P95MS: 500, MaxMS: 500},
		{Policy: "spiky", Runs: 20, MedianMS: 5, P95MS: 5, MaxMS: 900},
		{Policy: "fast", Runs: 3, MedianMS: 2, P95MS: 3, MaxMS: 3},
	}
	if !slices.Equal(s.SlowestPolicies, want) {
		t.Errorf("slowest policies %+v, want %+v", s.SlowestPolicies, want)
	}
}

func TestStatsEmpty(t *testing.T) {
	s, err := newDB(t).Stats()
	if err != nil || s.Total != 0 || s.TopImports == nil || s.TopEvents == nil || s.SlowestPolicies == nil {
		t.Errorf("Stats of an empty log = %+v, %v; want zero counts and empty lists", s, err)
	}
}

// TestOutOfChainNotCounted: a finished row nsbox did not link (inserted
// beside the chain, with violations of its own) is neither listed nor
// counted, only reported as out of the chain.
func TestOutOfChainNotCounted(t *testing.T) {
	db := fixture(t)
	raw := rawDB(t, db)
	if _, err := raw.Exec(`INSERT INTO runs (id, start_ns, status, policy, policy_sha256, root_manifest_sha256, code_sha256, nsbox_version)
		VALUES ('forged', 1, 'ok', 'strict', '', '', '', 'v');
		INSERT INTO run_violations VALUES ('forged', 0, 'import', 'os', 1, 0, '');
		INSERT INTO run_violations VALUES ('forged', 1, 'event', 'os.system', 1, 0, '')`); err != nil {
		t.Fatal(err)
	}
	runs, err := db.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == "forged" {
			t.Errorf("List shows the row outside the chain")
		}
	}
	if len(runs) != 4 {
		t.Errorf("List: %d runs, want the 4 of the fixture", len(runs))
	}
	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 4 || s.ByStatus["ok"] != 1 || s.OutOfChain != 1 {
		t.Errorf("Stats: total %d, ok %d, out of chain %d; want 4, 1, 1", s.Total, s.ByStatus["ok"], s.OutOfChain)
	}
	if !slices.Equal(s.TopImports, []Count{{Name: "os", Runs: 2, Times: 3}}) || len(s.TopEvents) != 1 {
		t.Errorf("Stats counts the forged violations: imports %+v events %+v", s.TopImports, s.TopEvents)
	}
}
