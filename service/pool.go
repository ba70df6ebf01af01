package service

import (
	"context"
	"log"
	"sync"
	"time"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/pool"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/session"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// MaxPool bounds Config.Pool: each waiting sandbox holds an interpreter
// with its preloads in memory, per policy served.
const MaxPool = 64

// pools are the service's warm sandboxes, two pools per policy served
// (sandbox/pool): one of run-mode sandboxes whose runner waits for its
// program, one of sessions whose interpreter waits for its first cell,
// both with the policy's preload imported. A one-shot run that does not
// narrow its policy's limits takes one and skips every step before its
// program; a new session that does not narrow timeout_per_cell takes an
// open one (session.Claim gives it the request's labels and idle
// timeout). A request that finds its pool empty, or narrows a limit, is
// served cold. Each sandbox is used once. They start with Serve and are
// torn down by Shutdown, once no request can take one.
type pools struct {
	cfg             Config
	log             *log.Logger
	waiting         func(policy string, n int) // the metrics' gauges
	waitingSessions func(policy string, n int)

	mu       sync.Mutex
	byName   map[string]*pool.Pool[*job.Warm]
	sessions map[string]*pool.Pool[warmSession]
	closed   bool
}

// warmSession is a session opened ahead, waiting for a caller.
type warmSession struct{ *session.Session }

func (w warmSession) Alive() bool { return w.Waiting() }
func (w warmSession) Discard()    { w.Close() }

func newPools(cfg Config, l *log.Logger, waiting, waitingSessions func(policy string, n int)) *pools {
	return &pools{cfg: cfg, log: l, waiting: waiting, waitingSessions: waitingSessions}
}

// start starts a pool per policy (none when Config.Pool is 0).
func (ps *pools) start() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.cfg.Pool == 0 || ps.byName != nil || ps.closed {
		return
	}
	ps.byName = map[string]*pool.Pool[*job.Warm]{}
	ps.sessions = map[string]*pool.Pool[warmSession]{}
	for name, pol := range ps.cfg.Policies {
		ps.sessions[name] = pool.New(pool.Options{
			Size: ps.cfg.Pool,
			OnError: func(err error) {
				ps.log.Printf("pool %s: a session could not be opened ahead: %v", name, err)
			},
			OnWaiting: func(n int) { ps.waitingSessions(name, n) },
		}, func(ctx context.Context) (warmSession, error) {
			ss, err := openAhead(ctx, pol, ps.cfg)
			return warmSession{ss}, err
		})
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

// openAhead opens a session of pol for a pool: the plan a session
// request without narrowing gets, no labels, no idle timeout (Claim sets
// them). Its interpreter imports the preload and waits for a first cell.
func openAhead(ctx context.Context, pol *policies.Policy, cfg Config) (*session.Session, error) {
	pl, err := planner.Make(pol, planner.Flags{Warm: true}, plan.ReadHost(pol.Sandbox.Require))
	if err != nil {
		return nil, err
	}
	pl.Runner.Mode, pl.Runner.Outputs = pyrunner.ModeSession, true
	if err := job.EnsureBase(ctx, pl.Root.Name, cfg.Log); err != nil {
		return nil, err
	}
	return session.Open(ctx, session.Options{Plan: pl, StateDir: supervisor.StateDir(), AuditDB: cfg.AuditDB})
}

// takeSession returns a session of the policy opened ahead and claimed
// with labels and idle, or nil: the caller then opens one. Only a
// request that does not narrow the policy (timeout_per_cell) takes one.
func (ps *pools) takeSession(name string, pol *policies.Policy, f planner.Flags, labels map[string]string, idle time.Duration) *session.Session {
	ps.mu.Lock()
	p := ps.sessions[name]
	ps.mu.Unlock()
	if p == nil || ps.cfg.Policies[name] != pol || f != (planner.Flags{Warm: true}) {
		return nil
	}
	for {
		w, ok := p.Take()
		if !ok {
			return nil
		}
		if err := w.Claim(labels, idle); err == nil {
			return w.Session
		}
		// Not claimable (it ended meanwhile): never handed on.
		go w.Close()
	}
}

// close tears every pool down and keeps new ones from starting.
func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	all := ps.byName
	sessions := ps.sessions
	ps.byName, ps.sessions = nil, nil
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.Close() }()
	}
	for _, p := range sessions {
		wg.Add(1)
		go func() { defer wg.Done(); p.Close() }()
	}
	wg.Wait()
}
