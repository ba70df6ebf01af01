package supervisor

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// phases records how long each step of a run took (--trace-phases), to
// find where the per-call time goes. When off, mark costs one branch.
type phases struct {
	on   bool
	last time.Time
	list []result.Phase
}

// mark closes the phase that ended now under name.
func (p *phases) mark(name string) {
	if p == nil || !p.on {
		return
	}
	p.markAt(name, time.Now())
}

// markAt closes the phase that ended at t under name. A t before the last
// mark (another process's clock read, raced by this one) counts as the
// last mark: phases never overlap, so they still sum to the run.
func (p *phases) markAt(name string, t time.Time) {
	if t.Before(p.last) {
		t = p.last
	}
	p.list = append(p.list, result.Phase{Name: name, MS: float64(t.Sub(p.last).Microseconds()) / 1000})
	p.last = t
}

// markInit adds the init's setup steps, as "init: <step>", placing them on
// this process's clock: both read CLOCK_MONOTONIC (the sandbox has no time
// namespace). The first, "init: runtime start", runs from the last mark
// (the init's execve) to the init's Go main.
func (p *phases) markInit(steps []spec.Step) {
	if p == nil || !p.on || len(steps) == 0 {
		return
	}
	now := time.Now()
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return // no way to place them: the caller's mark covers them
	}
	for _, s := range steps {
		p.markAt("init: "+s.Name, now.Add(time.Duration(s.End-ts.Nano())))
	}
}

type phasesKey struct{}

func withPhases(ctx context.Context, p *phases) context.Context {
	return context.WithValue(ctx, phasesKey{}, p)
}

// phasesOf returns the run's recorder; nil (marks nothing) when absent.
func phasesOf(ctx context.Context) *phases {
	p, _ := ctx.Value(phasesKey{}).(*phases)
	return p
}
