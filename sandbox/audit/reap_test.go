package audit

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/sandbox/result"
)

// beginAs begins the sample run id as if supervisor sup had begun it at
// start; a nil sup is a row with none recorded (Begin would record this
// process, so the columns are cleared by hand).
func beginAs(t *testing.T, db *DB, id string, start time.Time, sup *Supervisor) *Run {
	t.Helper()
	r := sampleRun(id)
	r.Start = start
	r.Supervisor = sup
	if err := db.Begin(r); err != nil {
		t.Fatal(err)
	}
	if sup == nil {
		if _, err := rawDB(t, db).Exec(`UPDATE runs SET supervisor_machine_id = NULL, supervisor_boot_id = NULL, supervisor_pid = NULL,
			supervisor_start_ticks = NULL, supervisor_ns = NULL WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// self is this test process's identity.
func self(t *testing.T) Supervisor {
	t.Helper()
	s := thisHost().self
	if s == nil {
		t.Fatal("this process has no supervisor identity: /proc unreadable?")
	}
	return *s
}

// startedAt is the wall-clock time a process with these start ticks
// started, to the tick.
func startedAt(ticks int64) time.Time {
	return thisHost().booted.Add(time.Duration(ticks) * clockTick)
}

// sleeper starts a process that does nothing for a minute and returns it
// with its identity as Begin would record it.
func sleeper(t *testing.T) (*exec.Cmd, *Supervisor) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	sup := self(t)
	sup.PID, sup.StartTicks = int64(cmd.Process.Pid), st.startTicks
	return cmd, &sup
}

func reap(t *testing.T, db *DB, lim ReapLimits) int {
	t.Helper()
	n, err := db.Reap(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func get(t *testing.T, db *DB, id string) *Run {
	t.Helper()
	r, err := db.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantOrphan checks that id was finished as an orphan, ending within
// [lo, hi], with what Begin recorded kept.
func wantOrphan(t *testing.T, db *DB, id string, lo, hi time.Time) {
	t.Helper()
	r := get(t, db, id)
	switch {
	case r.Status != string(result.StatusKilled) || r.Reason != ReasonSupervisorDied:
		t.Errorf("%s: status %q reason %q, want killed, %q", id, r.Status, r.Reason, ReasonSupervisorDied)
	case !r.Finished() || r.ChainVersion != chainVersion:
		t.Errorf("%s: seq %d encoding %d, want in the chain under %d", id, r.Seq, r.ChainVersion, chainVersion)
	case r.End.Before(lo) || r.End.After(hi):
		t.Errorf("%s: end %v, want within [%v, %v]", id, r.End, lo, hi)
	case r.DurationMS != r.End.Sub(r.Start).Milliseconds():
		t.Errorf("%s: duration %d ms, want end - start = %d", id, r.DurationMS, r.End.Sub(r.Start).Milliseconds())
	case r.Code == nil || *r.Code != *sampleRun(id).Code || r.Labels["team"] != "ml" || r.Policy != "strict":
		t.Errorf("%s: what Begin recorded was lost: %+v", id, r)
	}
}

func wantUnfinished(t *testing.T, db *DB, id string) {
	t.Helper()
	if r := get(t, db, id); r.Status != StatusUnfinished || r.Finished() {
		t.Errorf("%s: status %q seq %d, want left unfinished", id, r.Status, r.Seq)
	}
}

func wantIntact(t *testing.T, db *DB, rows int64) {
	t.Helper()
	v, err := db.VerifyChain()
	if err != nil || v.Break != nil || v.Rows != rows {
		t.Errorf("VerifyChain = %+v, %v; want %d intact rows", v, err, rows)
	}
}

// TestReapDeadSupervisor: a supervisor SIGKILLed after Begin (a process of
// its own) leaves its row; Reap finishes it as killed, keeps what Begin
// recorded, and leaves the rows of live supervisors (this process, and
// another) alone, however old; the chain verifies.
func TestReapDeadSupervisor(t *testing.T) {
	db := newDB(t)
	record(t, db, "before")
	if errs := startChildren(t, db.Path(), "kill", 1)(); errs[0] == nil {
		t.Fatal("the child was not killed")
	}
	s := self(t)
	beginAs(t, db, "mine", time.Now().Add(-48*time.Hour), &s)
	_, other := sleeper(t)
	beginAs(t, db, "other", time.Now(), other)

	before := time.Now()
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Errorf("Reap finished %d rows, want 1", n)
	}
	wantOrphan(t, db, "kill-00", before, time.Now())
	wantUnfinished(t, db, "mine")
	wantUnfinished(t, db, "other")
	wantIntact(t, db, 2)
	if n := reap(t, db, ReapLimits{}); n != 0 {
		t.Errorf("a second Reap finished %d rows, want 0", n)
	}
}

// TestReapAfterExit: the same process, alive and then gone: left while it
// runs, finished once it has exited and been waited for.
func TestReapAfterExit(t *testing.T) {
	db := newDB(t)
	cmd, sup := sleeper(t)
	beginAs(t, db, "r", time.Now().Add(-time.Minute), sup)
	if n := reap(t, db, ReapLimits{}); n != 0 {
		t.Fatalf("Reap finished %d rows of a live supervisor", n)
	}
	cmd.Process.Kill()
	cmd.Wait()
	before := time.Now()
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Errorf("Reap finished %d rows, want 1", n)
	}
	wantOrphan(t, db, "r", before, time.Now())
	wantIntact(t, db, 1)
}

// TestReapZombie: a supervisor that died but was not yet waited for by its
// parent (a zombie) will never finish its row either.
func TestReapZombie(t *testing.T) {
	db := newDB(t)
	cmd, sup := sleeper(t)
	beginAs(t, db, "z", time.Now(), sup)
	cmd.Process.Kill()
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := readStat(fmt.Sprintf("/proc/%d/stat", sup.PID))
		if err == nil && st.state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed child is not a zombie: %+v %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Errorf("Reap finished %d rows of a zombie's, want 1", n)
	}
	wantIntact(t, db, 1)
}

// TestReapReusedPid: a live process holds the recorded pid, but it started
// at another time: the supervisor died before it started, which is the end
// recorded.
func TestReapReusedPid(t *testing.T) {
	db := newDB(t)
	s := self(t)
	reused := s
	reused.StartTicks--
	beginAs(t, db, "reused", startedAt(s.StartTicks).Add(-time.Hour), &reused)
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Fatalf("Reap finished %d rows, want 1", n)
	}
	// This process started within the tick s.StartTicks names.
	wantOrphan(t, db, "reused", startedAt(s.StartTicks), startedAt(s.StartTicks+1))
	wantIntact(t, db, 1)
}

// TestReapOtherBoot: a row from another boot is orphaned even though its
// pid and start time are this live process's: that process died before
// this boot, the end recorded.
func TestReapOtherBoot(t *testing.T) {
	db := newDB(t)
	s := self(t)
	s.BootID = "00000000-0000-0000-0000-000000000000"
	booted := thisHost().booted
	beginAs(t, db, "lastboot", booted.Add(-time.Hour), &s)
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Fatalf("Reap finished %d rows, want 1", n)
	}
	wantOrphan(t, db, "lastboot", booted, booted)
}

// TestReapUnjudgeable: rows whose supervisor cannot be checked from here
// (no identity recorded, as in rows from before it was; another PID or
// time namespace; another machine, as in a copy of its log, whose boot id
// says nothing about this one) are left until they are older than any run
// can last.
func TestReapUnjudgeable(t *testing.T) {
	db := newDB(t)
	elsewhere := self(t)
	elsewhere.Namespaces = "pid:[1] time:[2]"
	copied := self(t)
	copied.MachineID, copied.BootID = "another machine", "another boot"
	young, old := time.Now().Add(-MaxRunAge+time.Hour), time.Now().Add(-MaxRunAge-time.Minute)
	beginAs(t, db, "none-young", young, nil)
	beginAs(t, db, "none-old", old, nil)
	beginAs(t, db, "ns-young", young, &elsewhere)
	beginAs(t, db, "ns-old", old, &elsewhere)
	beginAs(t, db, "machine-young", young, &copied)
	beginAs(t, db, "machine-old", old, &copied)
	before := time.Now()
	if n := reap(t, db, ReapLimits{}); n != 3 {
		t.Errorf("Reap finished %d rows, want 3", n)
	}
	wantUnfinished(t, db, "none-young")
	wantUnfinished(t, db, "ns-young")
	wantUnfinished(t, db, "machine-young")
	wantOrphan(t, db, "none-old", before, time.Now())
	wantOrphan(t, db, "ns-old", before, time.Now())
	wantOrphan(t, db, "machine-old", before, time.Now())
	if r := get(t, db, "none-old"); r.Supervisor != nil {
		t.Errorf("none-old got a supervisor: %+v", r.Supervisor)
	}
	wantIntact(t, db, 3)
}

// TestReapLimits: Check bounds the rows looked at (oldest first, live ones
// included), Finish the rows finished.
func TestReapLimits(t *testing.T) {
	db := newDB(t)
	dead := self(t)
	dead.BootID = "other"
	t0 := time.Now().Add(-time.Hour)
	s := self(t)
	beginAs(t, db, "live", t0, &s)
	for i := range 10 {
		beginAs(t, db, fmt.Sprintf("d%d", i), t0.Add(time.Duration(i+1)*time.Second), &dead)
	}
	if n := reap(t, db, ReapLimits{Finish: 3}); n != 3 {
		t.Errorf("Reap(Finish 3) = %d", n)
	}
	// Oldest first: live, then d3..d6 are the five looked at.
	if n := reap(t, db, ReapLimits{Check: 5}); n != 4 {
		t.Errorf("Reap(Check 5) = %d, want 4", n)
	}
	wantUnfinished(t, db, "d7")
	if n := reap(t, db, ReapLimits{}); n != 3 {
		t.Errorf("Reap() = %d, want the last 3", n)
	}
	wantUnfinished(t, db, "live")
	wantIntact(t, db, 10)
}

// TestReapersAtOnce: several processes and goroutines reap the same orphans
// at once: each row is finished exactly once, every reaper succeeds, and
// the chain is one line.
func TestReapersAtOnce(t *testing.T) {
	const orphans = 200
	db := newDB(t)
	dead := self(t)
	dead.BootID = "other"
	for i := range orphans {
		beginAs(t, db, fmt.Sprintf("o%02d", i), time.Now().Add(-time.Minute), &dead)
	}
	s := self(t)
	beginAs(t, db, "live", time.Now().Add(-time.Hour), &s)
	wait := startChildrenOut(t, db.Path(), "reap", 4)
	var outs []string
	var errs []error
	var wg sync.WaitGroup
	wg.Go(func() { outs, errs = wait() }) // releases the children
	counts := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			n, err := db.Reap(context.Background(), ReapLimits{})
			if err != nil {
				t.Error(err)
			}
			counts <- n
		})
	}
	wg.Wait()
	close(counts)
	total := 0
	var each []int
	for n := range counts {
		total += n
		each = append(each, n)
	}
	for i, out := range outs {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Errorf("child %d printed %q", i, out)
		}
		total += n
		each = append(each, n)
	}
	t.Logf("rows finished by each reaper: %v", each)
	if total != orphans {
		t.Errorf("the reapers finished %d rows between them, want %d", total, orphans)
	}
	runs, err := db.List(Filter{Status: string(result.StatusKilled)})
	if err != nil || len(runs) != orphans {
		t.Errorf("%d killed rows (%v), want %d", len(runs), err, orphans)
	}
	wantUnfinished(t, db, "live")
	wantIntact(t, db, orphans)
}

// TestReapGivesUpOnLock: with the log locked by another writer, Reap gives
// up when its context ends rather than after SQLite's own busy timeout,
// and finishes nothing; once the lock is gone it finishes the row.
func TestReapGivesUpOnLock(t *testing.T) {
	db := newDB(t)
	dead := self(t)
	dead.BootID = "other"
	beginAs(t, db, "o", time.Now(), &dead)
	raw := rawDB(t, db)
	raw.SetMaxOpenConns(1)
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE runs SET policy = policy WHERE id = 'o'`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	n, err := db.Reap(ctx, ReapLimits{})
	took := time.Since(start)
	if err == nil || n != 0 || took > busyTimeout/2 {
		t.Errorf("Reap on a locked log = %d, %v after %v; want an error within about 200ms", n, err, took)
	}
	tx.Rollback()
	wantUnfinished(t, db, "o")
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Errorf("Reap after the lock = %d, want 1", n)
	}
}

// TestReapOldSchema: a log written by a version-1 nsbox (no reason, no
// supervisor, hashes under encoding 1) is migrated in place; its chain
// still verifies, its unfinished rows are judged by age only, and the
// orphan joins the chain after the old rows under encoding 2.
func TestReapOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, stmt := range []string{`PRAGMA journal_mode = WAL`, createVersionTable, migrations[0],
		`INSERT INTO schema_version (version, applied_at) VALUES (1, 0)`} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	done := sampleRun("v1-done")
	finishSample(done)
	done.Seq, done.PrevHash, done.ChainVersion = 1, genesisHash, 1
	done.Hash = rowHash(done)
	insertV1(t, raw, done)
	for id, ago := range map[string]time.Duration{"v1-young": time.Hour, "v1-old": MaxRunAge + time.Hour} {
		r := sampleRun(id)
		r.Start, r.Status = time.Now().Add(-ago), StatusUnfinished
		insertV1(t, raw, r)
	}

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wantIntact(t, db, 1)
	if r := get(t, db, "v1-done"); r.ChainVersion != 1 || r.Reason != "" || r.Supervisor != nil || sameRun(r, done) != nil {
		t.Errorf("v1 row after the migration: %+v (%v)", r, sameRun(r, done))
	}
	before := time.Now()
	if n := reap(t, db, ReapLimits{}); n != 1 {
		t.Errorf("Reap finished %d rows, want 1", n)
	}
	wantUnfinished(t, db, "v1-young")
	wantOrphan(t, db, "v1-old", before, time.Now())
	if r := get(t, db, "v1-old"); r.Seq != 2 || r.PrevHash != done.Hash {
		t.Errorf("orphan at seq %d after %s, want 2 after the v1 row %s", r.Seq, r.PrevHash, done.Hash)
	}
	wantIntact(t, db, 2)

	// Encoding 1 does not cover the reason: a v1 row given one is an edit.
	if _, err := raw.Exec(`UPDATE runs SET reason = 'timeout' WHERE id = 'v1-done'`); err != nil {
		t.Fatal(err)
	}
	if b, err := db.Verify(); err != nil || b == nil || b.ID != "v1-done" {
		t.Errorf("Verify after a reason was added to a v1 row = %v, %v", b, err)
	}
}

// insertV1 writes r as a version-1 nsbox did: only the version-1 columns.
func insertV1(t *testing.T, raw *sql.DB, r *Run) {
	t.Helper()
	var seq, end, prev, hash any
	if r.Seq != 0 {
		seq, end, prev, hash = r.Seq, r.End.UnixNano(), r.PrevHash, r.Hash
	}
	_, err := raw.Exec(`INSERT INTO runs (id, seq, start_ns, end_ns, duration_ms, status, policy, policy_sha256,
			root_manifest_sha256, code_sha256, exit_code, signal, cpu_ms, peak_memory_bytes, stdout_bytes,
			stderr_bytes, stdout_truncated, stderr_truncated, nsbox_version, prev_hash, hash, stdout_head,
			stderr_head, code)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, seq, r.Start.UnixNano(), end, r.DurationMS, r.Status, r.Policy, r.PolicySHA256,
		r.RootManifestSHA256, r.CodeSHA256, r.ExitCode, r.Signal, r.CPUMS, r.PeakMemoryBytes, r.StdoutBytes,
		r.StderrBytes, boolInt(r.StdoutTruncated), boolInt(r.StderrTruncated), r.NsboxVersion, prev, hash,
		nonNil(r.StdoutHead), nonNil(r.StderrHead), r.Code)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.Labels {
		if _, err := raw.Exec(`INSERT INTO run_labels VALUES (?, ?, ?)`, r.ID, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range r.Violations {
		if _, err := raw.Exec(`INSERT INTO run_violations VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, i, v.Kind, v.Name, v.Line, v.Col, v.Detail); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBeginRecordsSupervisor: Begin records this process, and its start
// time is the one /proc gives (field 22, after a command name that may
// hold spaces and parentheses).
func TestBeginRecordsSupervisor(t *testing.T) {
	db := newDB(t)
	r := sampleRun("me")
	if err := db.Begin(r); err != nil {
		t.Fatal(err)
	}
	got := get(t, db, "me").Supervisor
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if got == nil || got.PID != int64(os.Getpid()) || got.BootID != strings.TrimSpace(string(boot)) ||
		!strings.HasPrefix(got.Namespaces, "pid:[") || got.StartTicks <= 0 {
		t.Errorf("supervisor %+v, want this process", got)
	}
	if started := startedAt(got.StartTicks); time.Since(started) < 0 || time.Since(started) > time.Hour {
		t.Errorf("this process started at %v by its recorded start time", started)
	}
}

func TestParseStat(t *testing.T) {
	st, err := parseStat([]byte("4242 (a) b (c) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456 19 20\n"))
	if err != nil || st.pid != 4242 || st.state != 'Z' || st.startTicks != 123456 {
		t.Errorf("parseStat = %+v, %v", st, err)
	}
	for _, bad := range []string{"", "4242 a S", "x (a) S 1", "1 (a) S 1 2 3"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted it", bad)
		}
	}
}

// TestReasonClipped: the stored reason is valid UTF-8 of at most
// MaxReasonBytes, cut at a character boundary, and hashed as stored.
func TestReasonClipped(t *testing.T) {
	db := newDB(t)
	r := sampleRun("long")
	finishSample(r)
	r.Reason = "bad \xff byte " + strings.Repeat("é", MaxReasonBytes)
	if err := db.Finish(r); err != nil {
		t.Fatal(err)
	}
	got := get(t, db, "long").Reason
	if !utf8.ValidString(got) || len(got) > MaxReasonBytes || len(got) < MaxReasonBytes-1 || !strings.HasPrefix(got, "bad \uFFFD byte é") {
		t.Errorf("stored reason %d bytes, valid %v: %.20q", len(got), utf8.ValidString(got), got)
	}
	wantIntact(t, db, 1)
}
