package initproc

import (
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// stepTimer records when each setup step ended (Spec.Trace, nsbox run
// --trace-phases); the times go to the supervisor with Ready. Off, mark
// costs one branch.
type stepTimer struct {
	on    bool
	steps []spec.Step
}

// newStepTimer starts recording when on, with the steps timed before the
// spec said whether to (their times were taken anyway: two clock reads).
func newStepTimer(on bool, early ...spec.Step) *stepTimer {
	t := &stepTimer{on: on}
	if on {
		t.steps = append(make([]spec.Step, 0, 32), early...)
	}
	return t
}

// mark records that the step name ended now.
func (t *stepTimer) mark(name string) {
	if t.on {
		t.steps = append(t.steps, spec.Step{Name: name, End: monotonic()})
	}
}

// monotonic reads CLOCK_MONOTONIC, the clock the supervisor places the
// steps on (the sandbox has no time namespace). 0 if it cannot be read:
// a timing must never fail the run.
func monotonic() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
