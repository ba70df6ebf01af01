package supervisor

import (
	"context"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
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
	now := time.Now()
	p.list = append(p.list, result.Phase{Name: name, MS: float64(now.Sub(p.last).Microseconds()) / 1000})
	p.last = now
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
