package main

import (
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// mainStarted is when package main was initialised: after the runtime and
// every imported package, a fraction of a millisecond after exec.
var mainStarted = time.Now()

// trace adds the caller's side of a run to --trace-phases: what nsbox
// does before the supervisor starts (start-up, policy, the audit row) and
// after it returns (finishing the row). The supervisor's own phases go in
// between, so the phases cover the whole command but Go's start-up before
// main and the printing of the result.
type trace struct {
	on     bool
	last   time.Time
	before []result.Phase
	after  []result.Phase
	ran    bool
}

func newTrace(on bool) *trace {
	t := &trace{on: on, last: mainStarted}
	t.mark("start-up")
	return t
}

func (t *trace) mark(name string) {
	if !t.on {
		return
	}
	now := time.Now()
	p := result.Phase{Name: name, MS: float64(now.Sub(t.last).Microseconds()) / 1000}
	if t.ran {
		t.after = append(t.after, p)
	} else {
		t.before = append(t.before, p)
	}
	t.last = now
}

// resume starts the clock again after the supervisor returned.
func (t *trace) resume() {
	t.ran = true
	t.last = time.Now()
}

// wrap puts the caller's phases around the supervisor's in r.
func (t *trace) wrap(r *result.Result) {
	if !t.on || len(r.Phases) == 0 {
		return
	}
	r.Phases = append(append(t.before, r.Phases...), t.after...)
}
