// Package trace records how long each step of a run took (nsbox run
// --trace-phases), on one clock, in one type, from the caller's start-up
// through the supervisor's steps and the init's steps inside the sandbox
// to the audit row's close.
//
// Every process of a run reads the same clock, CLOCK_MONOTONIC (the
// sandbox has no time namespace), so the init's marks, sent to the
// supervisor with Ready, fall into place among the host's. Off, a mark
// costs one branch; a Recorder never fails a run.
package trace

import (
	"cmp"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
)

// Mark says that the step Name ended at End, CLOCK_MONOTONIC nanoseconds.
// It is also the init's wire form (spec.Ready carries a list of them).
type Mark struct {
	Name string `json:"name"`
	End  int64  `json:"end_ns"`
}

// Recorder collects marks. The zero value and nil record nothing.
type Recorder struct {
	on    bool
	start int64
	marks []Mark
}

// New returns a recorder that records when on, timing its first step from
// start (a Now reading, e.g. the process's own start).
func New(on bool, start int64) *Recorder {
	r := &Recorder{on: on, start: start}
	if on {
		r.marks = make([]Mark, 0, 64)
	}
	return r
}

// On reports whether r records.
func (r *Recorder) On() bool { return r != nil && r.on }

// Mark records that the step name ended now.
func (r *Recorder) Mark(name string) {
	if r.On() {
		r.marks = append(r.marks, Mark{Name: name, End: Now()})
	}
}

// Add records marks taken elsewhere (the init's), each name prefixed.
func (r *Recorder) Add(prefix string, marks []Mark) {
	if !r.On() {
		return
	}
	for _, m := range marks {
		r.marks = append(r.marks, Mark{Name: prefix + m.Name, End: m.End})
	}
}

// Marks returns the marks recorded so far (the init sends these).
func (r *Recorder) Marks() []Mark {
	if !r.On() {
		return nil
	}
	return r.marks
}

// Phases turns the marks into phases, in the order they ended: each lasts
// from the mark before it (or the start) to its own. Marks taken in
// another process (the init's, added when they arrive) fall into place
// among this process's by their time, so a step the init finished while
// the supervisor waited is timed as it ran. Phases never overlap, so
// they sum to the time covered. Nil when off.
func (r *Recorder) Phases() []result.Phase {
	if !r.On() || len(r.marks) == 0 {
		return nil
	}
	marks := slices.Clone(r.marks)
	slices.SortStableFunc(marks, func(a, b Mark) int { return cmp.Compare(a.End, b.End) })
	out := make([]result.Phase, 0, len(marks))
	last := r.start
	for _, m := range marks {
		end := max(m.End, last)
		out = append(out, result.Phase{Name: m.Name, MS: float64((end-last)/1000) / 1000})
		last = end
	}
	return out
}

// Now reads CLOCK_MONOTONIC in nanoseconds; 0 if it cannot be read (a
// timing must never fail a run).
func Now() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
