package service

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nsbox/nsbox/sandbox/session"
)

// DefaultIdleTimeout closes a session that ran no cell for this long,
// unless its request says otherwise.
const DefaultIdleTimeout = 10 * time.Minute

// sessionTable holds the open sessions. A session leaves it when it is
// torn down, whoever tore it down (DELETE, its idle timeout, a cell that
// ended it, the drain).
type sessionTable struct {
	mu      sync.Mutex
	byID    map[string]*session.Session
	closing bool // the drain began: no new session
}

// add records s unless the table is full or closing.
func (t *sessionTable) add(s *session.Session, max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closing:
		return errDraining
	case len(t.byID) >= max:
		return errTooManySessions
	}
	t.byID[s.ID()] = s
	go func() {
		<-s.Done()
		t.mu.Lock()
		delete(t.byID, s.ID())
		t.mu.Unlock()
	}()
	return nil
}

func (t *sessionTable) get(id string) *session.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

func (t *sessionTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

func (t *sessionTable) all() []*session.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*session.Session
	for _, s := range t.byID {
		out = append(out, s)
	}
	return out
}

// closeAll refuses new sessions and ends every open one; nothing of them
// is left when it returns.
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range t.all() {
		wg.Go(func() { s.Close() })
	}
	wg.Wait()
}

var (
	errDraining        = errors.New("the service is shutting down")
	errTooManySessions = errors.New("too many sessions")
)

// sessionRequest is POST /v1/sessions' body (SessionRequest).
type sessionRequest struct {
	Policy         string            `json:"policy"`
	TimeoutPerCell *float64          `json:"timeout_per_cell"` // seconds; at most the policy's timeout
	IdleTimeout    *float64          `json:"idle_timeout"`     // seconds
	Labels         map[string]string `json:"labels"`
}

// sessionCreated is its answer (Session).
type sessionCreated struct {
	ID      string    `json:"id"`
	Policy  string    `json:"policy"`
	Created time.Time `json:"created"`
}

// cellRequest is POST /v1/sessions/{id}/cells' body (CellRequest).
type cellRequest struct {
	Code    string   `json:"code"`
	Timeout *float64 `json:"timeout"` // seconds; at most the session's timeout_per_cell
	// StdinBase64 is read only to be refused by name: a cell has no
	// standard input (the session's program finds stdin at EOF).
	StdinBase64 *string `json:"stdin_base64"`
}

// seconds turns a request's number of seconds into a duration.
func seconds(name string, v float64) (time.Duration, error) {
	if !(v > 0) || v*float64(time.Second) > math.MaxInt64 {
		return 0, fmt.Errorf("%s %v: must be a positive number of seconds", name, v)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// postSession is POST /v1/sessions: a live sandbox whose interpreter
// waits for cells.
func (s *Server) postSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if !s.readBody(w, r, &req) {
		return
	}
	ss, name, err := s.openSession(r.Context(), req)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	info := ss.Info()
	writeJSON(w, http.StatusCreated, sessionCreated{ID: info.ID, Policy: name, Created: info.Created})
}

// readBody decodes a JSON request body into v, or answers 413 or 400.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength > s.cfg.MaxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is %d bytes, more than this service accepts (%d)", r.ContentLength, s.cfg.MaxBody))
		return false
	}
	if err := decodeBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is larger than this service accepts (%d bytes)", s.cfg.MaxBody))
			return false
		}
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return false
	}
	return true
}

// session returns the request's session, or answers 404.
func (s *Server) session(w http.ResponseWriter, r *http.Request) *session.Session {
	id := r.PathValue("id")
	ss := s.sessions.get(id)
	if ss == nil {
		writeError(w, http.StatusNotFound, "no_session", fmt.Sprintf("no open session %q", id))
	}
	return ss
}

// sessionList is GET /v1/sessions' answer.
type sessionList struct {
	Sessions []session.Info `json:"sessions"`
}

func (s *Server) getSessions(w http.ResponseWriter, r *http.Request) {
	out := sessionList{Sessions: []session.Info{}}
	for _, ss := range s.sessions.all() {
		out.Sessions = append(out.Sessions, ss.Info())
	}
	slices.SortFunc(out.Sessions, func(a, b session.Info) int { return a.Created.Compare(b.Created) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	if ss := s.session(w, r); ss != nil {
		writeJSON(w, http.StatusOK, ss.Info())
	}
}

// deleteSession ends the session (a running cell is killed) and answers
// with the session's own result: how its interpreter ended, and the CPU
// time and peak memory of the whole session.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	ss := s.session(w, r)
	if ss == nil {
		return
	}
	final := s.closeSession(ss)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = final.WriteJSON(w)
}

// postCell is POST /v1/sessions/{id}/cells: the session's next cell, its
// result as a run's (with the cell's outputs and exception). 409 while
// another cell of the session runs.
func (s *Server) postCell(w http.ResponseWriter, r *http.Request) {
	ss := s.session(w, r)
	if ss == nil {
		return
	}
	var req cellRequest
	if !s.readBody(w, r, &req) {
		return
	}
	if req.StdinBase64 != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "stdin_base64: a session's cells have no standard input (the program's stdin is at EOF); give the program input in a one-shot run (POST /v1/runs), or write it to a file (PUT /v1/sessions/{id}/files/{path})")
		return
	}
	if wantsStream(r) {
		// As for a run: events as the cell writes, then its result. The
		// answer begins with the first line, so a cell refused before it
		// ran is still a JSON error.
		ev := newEventStream(w)
		stdout, stderr := &streamWriter{name: "stdout", ev: ev}, &streamWriter{name: "stderr", ev: ev}
		res, err := s.cell(r.Context(), ss, req, stdout, stderr)
		switch {
		case err == nil:
			if stdout.flush() == nil && stderr.flush() == nil {
				ev.finish(res)
			}
		case !ev.began(): // a cell refused writes no output
			writeRefusal(w, err)
		}
		return
	}
	res, err := s.cell(r.Context(), ss, req, nil, nil)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = res.WriteJSON(w)
}

// interrupted is POST /v1/sessions/{id}/interrupt's answer.
type interrupted struct {
	Interrupted bool `json:"interrupted"` // a cell was running
}

func (s *Server) postInterrupt(w http.ResponseWriter, r *http.Request) {
	if ss := s.session(w, r); ss != nil {
		writeJSON(w, http.StatusOK, interrupted{Interrupted: ss.Interrupt()})
	}
}

// closeSessions ends every session at the drain, once no request is in
// flight.
func (s *Server) closeSessions() {
	s.sessions.closeAll()
}
