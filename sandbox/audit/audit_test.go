package audit

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

func TestPath(t *testing.T) {
	t.Setenv(EnvPath, "")
	if got := Path(""); got != DefaultPath {
		t.Errorf("Path(\"\") = %q, want %q", got, DefaultPath)
	}
	t.Setenv(EnvPath, "/env/audit.db")
	if got := Path(""); got != "/env/audit.db" {
		t.Errorf("Path(\"\") with $%s = %q", EnvPath, got)
	}
	if got := Path("/flag/audit.db"); got != "/flag/audit.db" {
		t.Errorf("Path(flag) = %q, want the flag", got)
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "audit.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The -wal file appears with the first write.
	record(t, db, "r1")
	for p, want := range map[string]os.FileMode{
		dir: 0o700 | os.ModeDir, filepath.Dir(dir): 0o700 | os.ModeDir,
		path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	var mode string
	if err := rawDB(t, db).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	// Nothing of the build under a temporary name is left.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "audit.db") {
			t.Errorf("left in %s: %s", dir, e.Name())
		}
	}
}

func TestOpenErrorNamesPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "audit.db") // a directory that is a file
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Open(%s) = %v, want an error naming the path", path, err)
	}
}

// TestOpenRefusesNonRegular: a FIFO, a directory or a device (through a
// symlink, as --audit-db /dev/null would be) is refused by name, and
// nothing is created beside it (SQLite would write NAME-journal there).
func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "null")
	if err := os.Symlink(os.DevNull, dev); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{fifo: "a FIFO", sub: "a directory", dev: "a device"} {
		_, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), kind) {
			t.Errorf("Open(%s) = %v, want a refusal naming the path and %s", path, err, kind)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files beside the refused logs: %v, want only fifo, null and sub", names)
	}
}

// TestOpenMigratesEmptyFile: a file created by hand (touch) is given WAL
// mode and the schema.
func TestOpenMigratesEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	record(t, db, "r1")
	var mode string
	var version int
	raw := rawDB(t, db)
	if err := raw.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := raw.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != SchemaVersion {
		t.Errorf("schema version %d, %v; want %d", version, err, SchemaVersion)
	}
}

// TestOpenRefusesOtherDatabase: --audit-db pointed at someone else's
// SQLite file leaves it alone.
func TestOpenRefusesOtherDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	other, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec(`CREATE TABLE precious (x)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "not an nsbox audit database") {
		t.Errorf("Open of another database = %v, want a refusal", err)
	}
	var n int
	if err := other.QueryRow(`SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the other database now has %d schema entries, %v", n, err)
	}
}

// TestFinishAfterBrokenHead: a head edited into nonsense does not stop the
// log; Verify names it.
func TestFinishAfterBrokenHead(t *testing.T) {
	db := newDB(t)
	record(t, db, "r1", "r2")
	if _, err := rawDB(t, db).Exec(`UPDATE runs SET hash = NULL WHERE id = 'r2'`); err != nil {
		t.Fatal(err)
	}
	record(t, db, "r3")
	if b, err := db.Verify(); err != nil || b == nil || b.ID != "r2" {
		t.Errorf("Verify = %v, %v; want r2", b, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	db := newDB(t)
	if _, err := rawDB(t, db).Exec(`INSERT INTO schema_version VALUES (?, 0)`, SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := Open(db.Path())
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema = %v, want a refusal", err)
	}
}

func TestRoundTrip(t *testing.T) {
	db := newDB(t)
	r := sampleRun("run-1")
	if err := db.Begin(r); err != nil {
		t.Fatal(err)
	}
	// At start: every field Begin has, status unfinished, not in the chain.
	got, err := db.Get("run-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRun(got, r); err != nil {
		t.Errorf("after Begin: %v", err)
	}
	if got.Status != StatusUnfinished || got.Finished() {
		t.Errorf("after Begin: status %q, seq %d; want unfinished, 0", got.Status, got.Seq)
	}

	finishSample(r)
	r.Labels["job"] = "43" // Finish writes the labels it is given
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1 || r.PrevHash != genesisHash || len(r.Hash) != 64 {
		t.Errorf("Finish set seq %d prev %q hash %q", r.Seq, r.PrevHash, r.Hash)
	}
	got, err = db.Get("run-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRun(got, r); err != nil {
		t.Errorf("after Finish: %v", err)
	}
}

// TestRoundTripNulls: the optional fields absent, empty heads, no labels or
// violations.
func TestRoundTripNulls(t *testing.T) {
	db := newDB(t)
	r := &Run{ID: "bare", Start: time.Now(), Policy: "default", NsboxVersion: "dev"}
	if err := db.Begin(r); err != nil {
		t.Fatal(err)
	}
	r.Status = string(result.StatusSandboxError)
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	if r.End.IsZero() {
		t.Error("Finish left End zero")
	}
	got, err := db.Get("bare")
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRun(got, r); err != nil {
		t.Error(err)
	}
	if got.Code != nil || got.ExitCode != nil || got.Signal != nil || got.CPUMS != nil || got.PeakMemoryBytes != nil {
		t.Errorf("absent fields read back set: %+v", got)
	}
}

func TestHeadsCut(t *testing.T) {
	db := newDB(t)
	r := sampleRun("big")
	db.Begin(r)
	finishSample(r)
	r.StdoutHead = make([]byte, 5000)
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Get("big")
	if len(got.StdoutHead) != HeadBytes || len(r.StdoutHead) != HeadBytes {
		t.Errorf("stdout head stored %d bytes, left %d in the run; want %d", len(got.StdoutHead), len(r.StdoutHead), HeadBytes)
	}
	if b, err := db.Verify(); b != nil || err != nil {
		t.Errorf("Verify = %v, %v", b, err)
	}
}

func TestFinishTwice(t *testing.T) {
	db := newDB(t)
	r := record(t, db, "once")[0]
	seq := r.Seq
	r.Status = string(result.StatusOK)
	if err := db.Finish(r); !errors.Is(err, ErrFinished) {
		t.Errorf("second Finish = %v, want ErrFinished", err)
	}
	if r.Seq != seq {
		t.Errorf("failed Finish changed seq to %d", r.Seq)
	}
	if got, _ := db.Get("once"); got.Status != string(result.StatusError) {
		t.Errorf("failed Finish changed status to %q", got.Status)
	}
}

// TestFinishWithoutBegin: a run whose Begin failed is still recorded whole.
func TestFinishWithoutBegin(t *testing.T) {
	db := newDB(t)
	r := sampleRun("late")
	finishSample(r)
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	got, err := db.Get("late")
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRun(got, r); err != nil {
		t.Error(err)
	}
}

func TestBeginFinishRefuse(t *testing.T) {
	db := newDB(t)
	for name, r := range map[string]*Run{
		"no id":        {Start: time.Now()},
		"label no key": {ID: "x", Labels: map[string]string{"": "v"}},
		"label =":      {ID: "x", Labels: map[string]string{"a=b": "v"}},
		"label value":  {ID: "x", Labels: map[string]string{"k": strings.Repeat("v", MaxLabelValueBytes+1)}},
	} {
		if err := db.Begin(r); err == nil {
			t.Errorf("%s: Begin accepted %+v", name, r)
		}
	}
	r := sampleRun("dup")
	if err := db.Begin(r); err != nil {
		t.Fatal(err)
	}
	if err := db.Begin(sampleRun("dup")); err == nil || !strings.Contains(err.Error(), "dup") {
		t.Errorf("Begin of an existing id = %v, want an error naming it", err)
	}
	for _, status := range []string{"", StatusUnfinished} {
		r.Status = status
		if err := db.Finish(r); err == nil {
			t.Errorf("Finish accepted status %q", status)
		}
	}
}

func TestParseLabel(t *testing.T) {
	for _, tc := range []struct {
		in, k, v string
		ok       bool
	}{
		{"team=ml", "team", "ml", true},
		{"expr=a=b", "expr", "a=b", true},
		{"empty=", "empty", "", true},
		{"novalue", "", "", false},
		{"=v", "", "", false},
		{"bad=\xff", "", "", false},
	} {
		k, v, err := ParseLabel(tc.in)
		if (err == nil) != tc.ok || k != tc.k || v != tc.v {
			t.Errorf("ParseLabel(%q) = %q, %q, %v; want %q, %q, ok=%v", tc.in, k, v, err, tc.k, tc.v, tc.ok)
		}
	}
}
