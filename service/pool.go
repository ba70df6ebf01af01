package service

import (
	"context"
	"log"
	"sync"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/pool"
)

// MaxPool bounds Config.Pool: each waiting sandbox holds an interpreter
// with its preloads in memory, per policy served.
const MaxPool = 64

// pools are the service's warm sandboxes, one pool per policy served
// (sandbox/pool): a one-shot run that does not narrow its policy's
// limits takes one and skips every step before its program; a run that
// finds its pool empty, or narrows the timeout or output limit, is built
// cold, as nsbox run builds it. Each sandbox is used once. They start
// with Serve and are torn down by Shutdown, once no run can take one.
type pools struct {
	cfg     Config
	log     *log.Logger
	waiting func(policy string, n int) // the metrics' gauge

	mu     sync.Mutex
	byName map[string]*pool.Pool[*job.Warm]
	closed bool
}

func newPools(cfg Config, l *log.Logger, waiting func(policy string, n int)) *pools {
	return &pools{cfg: cfg, log: l, waiting: waiting}
}

// start starts a pool per policy (none when Config.Pool is 0).
func (ps *pools) start() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.cfg.Pool == 0 || ps.byName != nil || ps.closed {
		return
	}
	ps.byName = map[string]*pool.Pool[*job.Warm]{}
	for name, pol := range ps.cfg.Policies {
		ps.byName[name] = pool.New(pool.Options{
			Size: ps.cfg.Pool,
			OnError: func(err error) {
				ps.log.Printf("pool %s: a sandbox could not be started ahead: %v", name, err)
			},
			OnWaiting: func(n int) { ps.waiting(name, n) },
		}, func(ctx context.Context) (*job.Warm, error) {
			return job.StartWarm(ctx, pol, ps.cfg.Log)
		})
	}
}

// take returns a warm sandbox of the policy for a run with flags f, or
// nil: the run is then built cold.
func (ps *pools) take(name string, pol *policies.Policy, f planner.Flags) *job.Warm {
	ps.mu.Lock()
	p := ps.byName[name]
	ps.mu.Unlock()
	if p == nil || ps.cfg.Policies[name] != pol {
		return nil
	}
	if !job.WarmFits(f) {
		return nil
	}
	w, ok := p.Take()
	if !ok {
		return nil
	}
	return w
}

// close tears every pool down and keeps new ones from starting.
func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	all := ps.byName
	ps.byName = nil
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.Close() }()
	}
	wg.Wait()
}
