// Package pool keeps sandboxes started ahead of their programs, a few per
// policy, so that a run does not wait for one to be built: namespaces,
// cgroup, root, mounts, limits, seccomp and the interpreter with its
// preloads are done before the request arrives.
//
// A sandbox leaves the pool once: Take hands it to one run, which tears
// it down; nothing that ran code comes back. The pool refills in the
// background, one sandbox at a time (a refill competes with the runs for
// the CPU, and a burst is better served by cold runs than by a burst of
// starts). A waiting sandbox that died (its runner failed, something
// killed it) or waited longer than MaxWait is discarded and replaced.
// Close discards every waiting sandbox and stops the refills.
//
// A sandbox's init dies with the thread that started it (PDEATHSIG,
// sandbox/supervisor): a service that is killed leaves no sandbox of its
// pools running, and the next Prepare sweeps their run directories.
package pool

import (
	"context"
	"sync"
	"time"
)

// Sandbox is what a pool holds: started ahead, still waiting or not.
type Sandbox interface {
	Alive() bool // still waiting for its program
	Discard()    // torn down, never used
}

// Start makes one sandbox; an error is retried after a back-off.
type Start[S Sandbox] func(ctx context.Context) (S, error)

// Options are a pool's settings.
type Options struct {
	Size    int           // sandboxes kept waiting; 0 keeps none
	MaxWait time.Duration // a sandbox older than this is replaced; 0 for DefaultMaxWait
	// OnError receives a failed start (logged by the service); nil
	// ignores it.
	OnError func(error)
	// OnWaiting receives the number of waiting sandboxes whenever it
	// changes (the service's metrics), under the pool's lock: it must not
	// call the pool. nil ignores it.
	OnWaiting func(int)
}

// DefaultMaxWait bounds how long a sandbox waits: one started long ago
// is replaced rather than trusted to still be what its plan says (a root
// rebuilt since, a host changed).
const DefaultMaxWait = 10 * time.Minute

// checkEvery is how often waiting sandboxes are checked for death and
// age.
const checkEvery = time.Second

// Back-off after a failed start: from the first to the last, doubling.
const (
	firstBackoff = 500 * time.Millisecond
	lastBackoff  = 30 * time.Second
)

// Pool is one policy's waiting sandboxes.
type Pool[S Sandbox] struct {
	o     Options
	start Start[S]

	mu      sync.Mutex
	waiting []entry[S]
	closed  bool
	counts  Counts

	wake   chan struct{} // a Take or Close: the refiller looks again
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the refiller has stopped
}

type entry[S Sandbox] struct {
	sb   S
	born time.Time
}

// Counts are a pool's figures since New, for metrics.
type Counts struct {
	Waiting   int    // sandboxes waiting now
	Started   uint64 // sandboxes started
	Failed    uint64 // starts that failed
	Taken     uint64 // sandboxes handed to a run
	Missed    uint64 // Takes that found none waiting
	Discarded uint64 // sandboxes torn down unused: dead, too old, or at Close
}

// New starts a pool and its refiller.
func New[S Sandbox](o Options, start Start[S]) *Pool[S] {
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[S]{o: o, start: start, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go p.refill()
	return p
}

// Take returns a waiting sandbox, or false when none waits (the caller
// then builds one as a cold run does). The sandbox is the caller's.
func (p *Pool[S]) Take() (S, bool) {
	var zero S
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.poke()
	defer p.changed()
	for len(p.waiting) > 0 {
		// The oldest first: it has the least time left before MaxWait.
		e := p.waiting[0]
		p.waiting = p.waiting[1:]
		if e.sb.Alive() {
			p.counts.Taken++
			return e.sb, true
		}
		p.counts.Discarded++
		go e.sb.Discard()
	}
	p.counts.Missed++
	return zero, false
}

// Counts returns the pool's figures.
func (p *Pool[S]) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	c.Waiting = len(p.waiting)
	return c
}

// Close stops the refills and tears down every waiting sandbox; it
// returns when they are gone. A start in progress is waited for and
// discarded.
func (p *Pool[S]) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.poke()
	<-p.done
	p.mu.Lock()
	waiting := p.waiting
	p.waiting = nil
	p.counts.Discarded += uint64(len(waiting))
	p.changed()
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range waiting {
		wg.Add(1)
		go func() { defer wg.Done(); e.sb.Discard() }()
	}
	wg.Wait()
}

// changed reports the number waiting; p.mu is held.
func (p *Pool[S]) changed() {
	if p.o.OnWaiting != nil {
		p.o.OnWaiting(len(p.waiting))
	}
}

// poke wakes the refiller without blocking.
func (p *Pool[S]) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// refill keeps Size sandboxes waiting until Close.
func (p *Pool[S]) refill() {
	defer close(p.done)
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		p.prune()
		if p.need() {
			sb, err := p.start(p.ctx)
			p.mu.Lock()
			switch {
			case err != nil:
				p.counts.Failed++
			case p.closed:
				p.counts.Discarded++
			default:
				p.counts.Started++
				p.waiting = append(p.waiting, entry[S]{sb, time.Now()})
				p.changed()
			}
			closed := p.closed
			p.mu.Unlock()
			if err == nil && closed {
				sb.Discard()
			}
			if err != nil {
				if p.o.OnError != nil && p.ctx.Err() == nil {
					p.o.OnError(err)
				}
				backoff = min(max(2*backoff, firstBackoff), lastBackoff)
				select {
				case <-time.After(backoff):
				case <-p.ctx.Done():
					return
				}
				continue
			}
			backoff = 0
			continue
		}
		select {
		case <-p.wake:
		case <-tick.C:
		case <-p.ctx.Done():
			return
		}
	}
}

// need reports whether the pool is short of a sandbox.
func (p *Pool[S]) need() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && len(p.waiting) < p.o.Size
}

// prune discards waiting sandboxes that died or waited too long.
func (p *Pool[S]) prune() {
	p.mu.Lock()
	var gone []S
	kept := p.waiting[:0]
	for _, e := range p.waiting {
		if e.sb.Alive() && time.Since(e.born) < p.o.MaxWait {
			kept = append(kept, e)
		} else {
			gone = append(gone, e.sb)
		}
	}
	clear(p.waiting[len(kept):])
	p.waiting = kept
	p.counts.Discarded += uint64(len(gone))
	if len(gone) > 0 {
		p.changed()
	}
	p.mu.Unlock()
	for _, sb := range gone {
		sb.Discard()
	}
}
