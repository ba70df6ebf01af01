package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is a sandbox that records its end.
type fake struct {
	n         int
	dead      atomic.Bool
	discarded atomic.Bool
}

func (f *fake) Alive() bool { return !f.dead.Load() && !f.discarded.Load() }
func (f *fake) Discard() {
	if f.discarded.Swap(true) {
		panic("discarded twice")
	}
}

// maker starts fakes and remembers them.
type maker struct {
	mu   sync.Mutex
	all  []*fake
	fail atomic.Bool
}

func (m *maker) start(ctx context.Context) (*fake, error) {
	if m.fail.Load() {
		return nil, errors.New("no root")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &fake{n: len(m.all)}
	m.all = append(m.all, f)
	return f, nil
}

func (m *maker) get(i int) *fake {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.all[i]
}

func (m *maker) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.all)
}

// eventually waits for cond, or fails.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPool: the pool fills to its size, a Take hands each sandbox out
// once and the pool refills, a dead one is never handed out and is
// discarded, Close discards the waiting ones and nothing is left.
func TestPool(t *testing.T) {
	m := &maker{}
	var reported atomic.Int32
	reported.Store(-1)
	p := New(Options{Size: 2, OnWaiting: func(n int) { reported.Store(int32(n)) }}, m.start)
	eventually(t, "2 waiting", func() bool { return p.Counts().Waiting == 2 && reported.Load() == 2 })
	a, ok := p.Take()
	if !ok || a.n != 0 {
		t.Fatalf("take: %v %v, want the oldest", a, ok)
	}
	eventually(t, "refilled", func() bool { return p.Counts().Waiting == 2 && m.count() == 3 })
	m.get(1).dead.Store(true)
	b, ok := p.Take()
	if !ok || b.n != 2 {
		t.Fatalf("take after a death: %v %v, want the live one", b, ok)
	}
	eventually(t, "the dead one discarded", func() bool { return m.get(1).discarded.Load() })
	eventually(t, "refilled again", func() bool { return p.Counts().Waiting == 2 })
	p.Close()
	for i := range m.count() {
		f := m.get(i)
		if f == a || f == b {
			if f.discarded.Load() {
				t.Errorf("sandbox %d, taken, was discarded by the pool", f.n)
			}
			continue
		}
		if !f.discarded.Load() {
			t.Errorf("sandbox %d left after Close", f.n)
		}
	}
	if c := p.Counts(); c.Waiting != 0 || c.Taken != 2 || reported.Load() != 0 {
		t.Errorf("counts after Close: %+v", c)
	}
	if _, ok := p.Take(); ok {
		t.Error("a closed pool handed out a sandbox")
	}
}

// TestPoolMaxWait: a sandbox that waited too long is replaced.
func TestPoolMaxWait(t *testing.T) {
	m := &maker{}
	p := New(Options{Size: 1, MaxWait: 50 * time.Millisecond}, m.start)
	defer p.Close()
	eventually(t, "replaced", func() bool { return m.count() >= 2 && m.get(0).discarded.Load() })
}

// TestPoolFailing: failed starts are counted and retried, a Take then
// finds none (the caller runs cold), and the pool fills once starts work.
func TestPoolFailing(t *testing.T) {
	m := &maker{}
	m.fail.Store(true)
	var errs atomic.Int32
	p := New(Options{Size: 1, OnError: func(error) { errs.Add(1) }}, m.start)
	defer p.Close()
	eventually(t, "a failure reported", func() bool { return errs.Load() > 0 })
	if _, ok := p.Take(); ok {
		t.Fatal("a sandbox from a failing pool")
	}
	m.fail.Store(false)
	eventually(t, "filled after the failures", func() bool { return p.Counts().Waiting == 1 })
	if c := p.Counts(); c.Failed == 0 || c.Missed != 1 {
		t.Errorf("counts: %+v", c)
	}
}

// TestPoolZero: a pool of size 0 starts nothing.
func TestPoolZero(t *testing.T) {
	m := &maker{}
	p := New(Options{Size: 0}, m.start)
	time.Sleep(20 * time.Millisecond)
	p.Close()
	if m.count() != 0 {
		t.Errorf("%d started", m.count())
	}
}
