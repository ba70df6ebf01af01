package session

import (
	"errors"
	"maps"
	"time"
)

// ErrClaimed is Claim's refusal of a session that is not a fresh one
// opened ahead: already claimed, closed, or with a cell run.
var ErrClaimed = errors.New("the session is not waiting to be claimed")

// Claim hands a session opened ahead (by a pool: Open with no labels and
// no idle timeout, the runner ready with the policy's preload imported)
// to its caller, with the caller's labels and idle timeout; its creation
// time becomes now. Only a session that ran no cell can be claimed, and
// only once: nothing that ran code is handed on.
func (s *Session) Claim(labels map[string]string, idle time.Duration) error {
	o := s.o
	o.Labels, o.IdleTimeout = maps.Clone(labels), idle
	if err := check(o); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed || s.closed || s.cells > 0 || s.running || s.sb.Ended() || s.idle != nil || len(s.o.Labels) > 0 {
		return ErrClaimed
	}
	s.claimed = true
	s.o.Labels, s.o.IdleTimeout, s.created = o.Labels, idle, time.Now()
	if idle > 0 {
		s.idle = time.AfterFunc(idle, s.idleExpired)
	}
	return nil
}

// Waiting reports whether a session opened ahead still waits for its
// first cell and a caller: not claimed, its interpreter alive.
func (s *Session) Waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.claimed && !s.closed && s.cells == 0 && !s.sb.Ended()
}
