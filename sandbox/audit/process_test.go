package audit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// startChildren starts n copies of this test binary as nsbox processes
// (TestMain, child) on the database at path, all blocked on standard input,
// and returns a function that releases them at once and waits for them.
func startChildren(t *testing.T, path, mode string, n int) func() []error {
	t.Helper()
	wait := startChildrenOut(t, path, mode, n)
	return func() []error {
		_, errs := wait()
		return errs
	}
}

// startChildrenOut is startChildren that also returns each child's stdout.
func startChildrenOut(t *testing.T, path, mode string, n int) func() ([]string, []error) {
	t.Helper()
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr *bytes.Buffer
	}
	var procs []proc
	var release []*os.File
	for i := range n {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode, childDBEnv+"="+path,
			childIDEnv+"="+fmt.Sprintf("%s-%02d", mode, i))
		cmd.Stdin = pr
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		procs = append(procs, proc{cmd, &stdout, &stderr})
		release = append(release, pw)
	}
	return func() ([]string, []error) {
		for _, pw := range release {
			pw.Close()
		}
		outs, errs := make([]string, len(procs)), make([]error, len(procs))
		for i, p := range procs {
			if err := p.cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("child %d: %w: %s", i, err, p.stderr.String())
			}
			outs[i] = p.stdout.String()
		}
		return outs, errs
	}
}

// TestConcurrentProcesses: 50 nsbox processes start at once on a database
// none of them has yet, each opens it, begins and finishes one run: 50
// finished rows, seq 1..50, and the chain verifies.
func TestConcurrentProcesses(t *testing.T) {
	const n = 50
	path := filepath.Join(t.TempDir(), "new", "audit.db")
	for _, err := range startChildren(t, path, "finish", n)() {
		if err != nil {
			t.Error(err)
		}
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[int64]bool{}
	for _, r := range runs {
		if !r.Finished() || r.Status != "ok" {
			t.Errorf("run %s: status %s seq %d", r.ID, r.Status, r.Seq)
		}
		seqs[r.Seq] = true
	}
	if len(runs) != n || len(seqs) != n {
		t.Errorf("%d runs with %d distinct seqs, want %d", len(runs), len(seqs), n)
	}
	v, err := db.VerifyChain()
	if err != nil || v.Break != nil || v.Rows != n || v.HeadSeq != n {
		t.Errorf("VerifyChain = %+v, %v; want %d intact rows", v, err, n)
	}
}

// TestKilledMidRun: a supervisor SIGKILLed between Begin and Finish leaves
// its row, marked unfinished; the chain is unaffected.
func TestKilledMidRun(t *testing.T) {
	db := newDB(t)
	record(t, db, "before")
	errs := startChildren(t, db.Path(), "kill", 1)()
	if errs[0] == nil {
		t.Fatal("the child was not killed")
	}
	r, err := db.Get("kill-00")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusUnfinished || r.Finished() || !r.End.IsZero() {
		t.Errorf("killed run: status %q seq %d end %v; want unfinished", r.Status, r.Seq, r.End)
	}
	if b, err := db.Verify(); b != nil || err != nil {
		t.Errorf("Verify = %v, %v", b, err)
	}
	record(t, db, "after")
	if r, _ := db.Get("after"); r.Seq != 2 {
		t.Errorf("next finished run has seq %d, want 2", r.Seq)
	}
}

// TestConcurrentGoroutines: one DB shared by goroutines (several pooled
// connections) keeps the chain linear too.
func TestConcurrentGoroutines(t *testing.T) {
	db := newDB(t)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r := sampleRun(fmt.Sprintf("g-%02d", i))
			if err := db.Begin(r); err != nil {
				errs <- err
				return
			}
			finishSample(r)
			errs <- db.Finish(r)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	v, err := db.VerifyChain()
	if err != nil || v.Break != nil || v.Rows != n {
		t.Errorf("VerifyChain = %+v, %v; want %d intact rows", v, err, n)
	}
}
