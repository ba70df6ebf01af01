package job

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// Warm is a sandbox started ahead of its program under a policy, with the
// policy's preload imported (planner.Flags.Warm): a pool keeps some, and
// a run that takes one (Request.Warm) skips every step up to the
// program. It is used once: the run that takes it tears it down, and one
// never taken is discarded; nothing that ran code is reused.
type Warm struct {
	pol  *policies.Policy
	pl   *plan.Plan
	id   string
	sb   *supervisor.Sandbox
	born time.Time
	// taken is set once a run has the sandbox as its own.
	taken bool
}

// StartWarm prepares a sandbox for a run of pol with no flags but
// display outputs (a pool is a service's, whose runs return them) and
// releases it up to the runner waiting for its program. The base root is
// built first when it is missing (log says so).
func StartWarm(ctx context.Context, pol *policies.Policy, log io.Writer) (*Warm, error) {
	pl, err := planner.Make(pol, planner.Flags{Warm: true, Outputs: true}, plan.ReadHost(pol.Sandbox.Require))
	if err != nil {
		return nil, err
	}
	if err := EnsureBase(ctx, pl.Root.Name, log); err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	id := supervisor.NewID()
	// No trace: the sandbox's steps before the run are not the run's
	// (Execute restarts the result's duration).
	sb := supervisor.New(supervisor.Options{ID: id, Plan: pl, StateDir: supervisor.StateDir()})
	if err := sb.Prepare(); err != nil {
		sb.Finish()
		return nil, err
	}
	if err := sb.Warm(); err != nil {
		sb.Finish()
		return nil, err
	}
	return &Warm{pol: pol, pl: pl, id: id, sb: sb, born: time.Now()}, nil
}

// Alive reports whether the sandbox still waits for its program.
func (w *Warm) Alive() bool { return w.sb.Alive() }

// Age is how long the sandbox has waited.
func (w *Warm) Age() time.Duration { return time.Since(w.born) }

// Discard tears down a sandbox that no run took (nothing ran in it: no
// result, no audit row).
func (w *Warm) Discard() { w.sb.Finish() }

// WarmFits reports whether a run with these flags can take a warm
// sandbox: the warm plan is the policy's own with display outputs, so
// only a run that does not narrow it and asks for them.
func WarmFits(f planner.Flags) bool {
	return f.Timeout == 0 && f.OutputLimit == 0 && !f.CheckOnly && f.Filename == "" && f.Outputs
}
