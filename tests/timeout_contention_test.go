package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// killBound is how late after its deadline a run's kill may take effect
// (docs/result-schema.md): the program and every process of the run gone.
const killBound = time.Second

// TestTimeoutKillUnderContention runs 32 one-second busy loops, 16 at a
// time, beside 4 CPU spinners, and checks that each one's kill took effect
// within killBound of its deadline. Stopping a run used to freeze its
// cgroup right after the SIGKILL: the freezer caught the dying processes
// before they could exit, and the freezer's retry loops of the runs
// stopped together took the CPU the victims needed, for seconds.
//
// How late the kill was comes from --trace-phases: the wall clock is armed
// right after the "audit row" phase, and the phases after it run back to
// back until "program" ends, when the init is reaped (every process of
// the run is gone by then).
func TestTimeoutKillUnderContention(t *testing.T) {
	needRoot(t)
	mustHave(t, "python3")
	const (
		runs, parallel, spinners = 32, 16, 4
		timeout                  = time.Second
	)
	// Spinners that end by themselves even if this test dies, killed at
	// the end in any case.
	for range spinners {
		spin := exec.Command("python3", "-c", "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass")
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	}

	late := make([]time.Duration, runs)
	errs := make([]string, runs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			late[i], errs[i] = timeoutRun(t, timeout)
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("run %d: %s", i, e)
		}
	}
	sorted := append([]time.Duration(nil), late...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	t.Logf("%d runs of a %v busy loop, %d at a time, %d spinners: the kill took effect after the deadline by median %v, max %v",
		runs, timeout, parallel, spinners, sorted[runs/2], sorted[runs-1])
	for i, d := range late {
		if d > killBound {
			t.Errorf("run %d: killed %v after its deadline, want at most %v", i, d, killBound)
		}
	}
}

// timeoutRun runs one busy loop under timeout and returns how late after
// its deadline the program ended, or what went wrong. It runs in its own
// goroutine: failures come back as text, not through t.
func timeoutRun(t *testing.T, timeout time.Duration) (time.Duration, string) {
	cmd := exec.Command(nsboxBin, "run", "--json", "--trace-phases", "--policy", "default",
		"--timeout", timeout.String(), "-c", "while True: pass")
	state := t.TempDir()
	cmd.Env = append(cmd.Environ(), "NSBOX_STATE_DIR="+state, "NSBOX_AUDIT_DB="+state+"/audit.db")
	out, err := cmd.Output()
	if cmd.ProcessState == nil {
		return 0, fmt.Sprintf("nsbox did not run: %v", err)
	}
	res, derr := decodeResult(out)
	if derr != nil {
		return 0, derr.Error()
	}
	if res.Status != result.StatusTimeout || res.Limit != result.LimitWallTime {
		return 0, fmt.Sprintf("status %q limit %q (error %+v), want timeout by the wall clock", res.Status, res.Limit, res.Error)
	}
	return killLateness(res, timeout)
}

// killLateness is how late after its deadline the program of a timed-out
// run (run with --trace-phases) ended, or why that cannot be told.
func killLateness(res *result.Result, timeout time.Duration) (time.Duration, string) {
	armed, ms := false, 0.0
	for _, p := range res.Phases {
		if armed {
			ms += p.MS
		}
		if p.Name == "audit row" {
			armed = true
		}
		if p.Name == "program" && armed {
			return time.Duration(ms*float64(time.Millisecond)) - timeout, ""
		}
	}
	return 0, fmt.Sprintf("no \"audit row\" then \"program\" phase in %v", res.Phases)
}

// decodeResult reads the one result object of an nsbox --json run.
func decodeResult(out []byte) (*result.Result, error) {
	var res result.Result
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("no valid JSON result: %v\nstdout: %.2000s", err, out)
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON object: %.2000s", out)
	}
	return &res, nil
}
