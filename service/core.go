package service

// The service's core: a run, a session, a cell and a session's files as
// every door of the service does them. The HTTP handlers (runs.go,
// sessions.go, session_files.go) and the MCP tools (mcp.go) call these,
// so a request takes the same slot, the same pool, the same policy check
// and writes the same audit row whichever door it came through. A request
// the service will not attempt is a *refusal: the status and code the API
// answers with, and a message that says what to change.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/session"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// refusal is a request the service did not attempt.
type refusal struct {
	status int    // the HTTP answer's status
	code   string // its error code (docs/api.md, Errors)
	msg    string
	retry  bool // worth retrying at once: Retry-After: 1
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, code, format string, a ...any) *refusal {
	return &refusal{status: status, code: code, msg: fmt.Sprintf(format, a...)}
}

// writeRefusal answers with err's status and code (500 sandbox_error for
// an error that is not a refusal).
func writeRefusal(w http.ResponseWriter, err error) {
	var r *refusal
	if !errors.As(err, &r) {
		writeError(w, http.StatusInternalServerError, "sandbox_error", err.Error())
		return
	}
	if r.retry {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, r.status, r.code, r.msg)
}

// policy returns the served policy a request names ("" for the default),
// or a refusal that lists the ones served.
func (s *Server) policy(name string) (string, *policies.Policy, error) {
	if name == "" {
		name = defaultPolicy
	}
	pol, ok := s.cfg.Policies[name]
	if !ok {
		return name, nil, refuse(http.StatusForbidden, "policy_refused", "policy %q is not served here (served: %s)", name, joinNames(s.policyNames()))
	}
	return name, pol, nil
}

// run runs req once in a fresh sandbox (a warm one from the pool when it
// fits), as POST /v1/runs does; stdout and stderr, when set, receive the
// program's output as it writes. ctx is the caller's: its end stops the
// run (killed, "the client went away"), as does Stop. The error is a
// refusal: not a policy served, or as many runs in flight as allowed. A
// run refused for its input is a result (sandbox_error), not an error.
func (s *Server) run(ctx context.Context, req runRequest, stdout, stderr io.Writer) (*result.Result, error) {
	name, pol, err := s.policy(req.Policy)
	if err != nil {
		return nil, err
	}
	// A slot, or a refusal at once: a queue would hold connections and
	// memory for work the client can retry.
	select {
	case s.runs <- struct{}{}:
	default:
		r := refuse(http.StatusTooManyRequests, "too_many_runs", "%d runs are in flight, the most this service runs at once", s.cfg.MaxConcurrentRuns)
		r.retry = true
		return nil, r
	}
	s.active.Add(1)
	defer func() {
		s.active.Add(-1)
		<-s.runs
	}()
	jr := job.Request{
		Policy: pol, PolicyName: name, Code: []byte(req.Code), Labels: req.Labels,
		CollectFiles: req.CollectFiles, AuditDB: s.cfg.AuditDB, AuditLog: s.audit, Log: s.cfg.Log,
		Stdout: stdout, Stderr: stderr, Later: s.later,
	}
	jr.Flags, jr.InputError = runFlags(req)
	if jr.InputError == nil {
		jr.Files, jr.InputError = decodeFiles(req.Files)
	}
	if jr.InputError == nil {
		jr.Stdin, jr.InputError = decodeStdin(req)
	}
	if jr.InputError == nil {
		jr.Warm = s.pools.take(name, pol, jr.Flags)
	}
	ctx, cancel := runContext(ctx, s.stop)
	defer cancel()
	out := job.Run(ctx, jr)
	how := ""
	if stdout != nil {
		how = ", streamed"
	}
	s.log.Printf("run %s: %s (policy %s%s)", out.Result.ID, out.Result.Status, name, how)
	s.metrics.run(string(out.Result.Status))
	return out.Result, nil
}

// openSession opens a session as POST /v1/sessions does (a pooled one
// when it fits) and records it in the table; ctx bounds the opening only.
// It returns the session and the policy's name.
func (s *Server) openSession(ctx context.Context, req sessionRequest) (*session.Session, string, error) {
	name, pol, err := s.policy(req.Policy)
	if err != nil {
		return nil, name, err
	}
	var flags planner.Flags
	idle := DefaultIdleTimeout
	if req.TimeoutPerCell != nil {
		if flags.Timeout, err = seconds("timeout_per_cell", *req.TimeoutPerCell); err != nil {
			return nil, name, refuse(http.StatusBadRequest, "bad_request", "%v", err)
		}
	}
	if req.IdleTimeout != nil {
		if idle, err = seconds("idle_timeout", *req.IdleTimeout); err != nil {
			return nil, name, refuse(http.StatusBadRequest, "bad_request", "%v", err)
		}
	}
	if err := job.CheckLabels(req.Labels); err != nil {
		return nil, name, refuse(http.StatusBadRequest, "bad_request", "%v", err)
	}
	if s.sessions.count() >= s.cfg.MaxSessions {
		r := refuse(http.StatusTooManyRequests, "too_many_sessions", "%d sessions are open, the most this service keeps", s.cfg.MaxSessions)
		r.retry = true
		return nil, name, r
	}
	flags.Warm = true // started before its first cell: the policy's preload is imported
	pl, err := planner.Make(pol, flags, plan.ReadHost(pol.Sandbox.Require))
	if err != nil {
		// The request asked more than the policy allows, or this host
		// cannot enforce the policy: no sandbox.
		return nil, name, refuse(http.StatusBadRequest, "session_refused", "%v", err)
	}
	pl.Runner.Mode, pl.Runner.Outputs = pyrunner.ModeSession, true
	if err := job.EnsureBase(ctx, pl.Root.Name, s.cfg.Log); err != nil {
		return nil, name, refuse(http.StatusInternalServerError, "sandbox_error", "%v", err)
	}
	ss := s.pools.takeSession(name, pol, flags, req.Labels, idle)
	if ss == nil {
		ss, err = session.Open(ctx, session.Options{
			Plan: pl, StateDir: supervisor.StateDir(), AuditDB: s.cfg.AuditDB, Labels: req.Labels, IdleTimeout: idle,
		})
		if err != nil {
			return nil, name, refuse(http.StatusInternalServerError, "sandbox_error", "%v", err)
		}
	}
	if err := s.sessions.add(ss, s.cfg.MaxSessions); err != nil {
		ss.Close()
		r := refuse(http.StatusTooManyRequests, "too_many_sessions", "no session: %v", err)
		r.retry = true
		return nil, name, r
	}
	s.log.Printf("session %s: open (policy %s)", ss.ID(), name)
	return ss, name, nil
}

// cell runs req as the session's next cell, as POST
// /v1/sessions/{id}/cells does; stdout and stderr as for run.
func (s *Server) cell(ctx context.Context, ss *session.Session, req cellRequest, stdout, stderr io.Writer) (*result.Result, error) {
	var timeout time.Duration
	if req.Timeout != nil {
		var err error
		if timeout, err = seconds("timeout", *req.Timeout); err != nil {
			return nil, refuse(http.StatusBadRequest, "bad_request", "%v", err)
		}
	}
	ctx, cancel := runContext(ctx, s.stop)
	defer cancel()
	res, err := ss.RunTo(ctx, []byte(req.Code), timeout, stdout, stderr)
	switch {
	case errors.Is(err, session.ErrBusy):
		return nil, refuse(http.StatusConflict, "cell_running", "another cell of this session is running")
	case errors.Is(err, session.ErrClosed):
		return nil, refuse(http.StatusGone, "session_ended", "the session has ended")
	case errors.Is(err, session.ErrTooLarge):
		return nil, refuse(http.StatusRequestEntityTooLarge, "cell_too_large", "%v", err)
	case err != nil:
		return nil, refuse(http.StatusBadRequest, "bad_request", "%v", err)
	}
	how := ""
	if stdout != nil {
		how = " (streamed)"
	}
	s.log.Printf("session %s: cell %s: %s%s", ss.ID(), res.ID, res.Status, how)
	s.metrics.cell(string(res.Status))
	return res, nil
}

// closeSession ends ss (a running cell is killed) and returns the
// session's own result.
func (s *Server) closeSession(ss *session.Session) *result.Result {
	final := ss.Close()
	s.log.Printf("session %s: closed (%s)", ss.ID(), final.Status)
	return final
}

// sessionFiles returns the session's workspace, or a refusal once it
// ended.
func sessionFiles(ss *session.Session) (*supervisor.Files, error) {
	f, err := ss.Files()
	if err != nil {
		return nil, refuse(http.StatusGone, "session_ended", "%v", err)
	}
	return f, nil
}

// fileRefusal turns a Files error into its refusal: the path refused
// 400, missing 404, not a regular file 409, too large or the workspace
// full 413, the session ended 410.
func fileRefusal(err error) *refusal {
	switch {
	case errors.Is(err, supervisor.ErrRefused):
		return refuse(http.StatusBadRequest, "path_refused", "%v", err)
	case errors.Is(err, fs.ErrNotExist):
		return refuse(http.StatusNotFound, "no_file", "%v", err)
	case errors.Is(err, supervisor.ErrNotRegular), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EISDIR):
		return refuse(http.StatusConflict, "not_a_file", "%v", err)
	case errors.Is(err, supervisor.ErrTooLarge), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EFBIG):
		return refuse(http.StatusRequestEntityTooLarge, "file_too_large", "%v", err)
	case errors.Is(err, supervisor.ErrNoFiles):
		return refuse(http.StatusGone, "session_ended", "%v", err)
	}
	return refuse(http.StatusInternalServerError, "files_error", "%v", err)
}

// policyNames are the served policies' names, sorted.
func (s *Server) policyNames() []string {
	var names []string
	for n := range s.cfg.Policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func joinNames(names []string) string { return strings.Join(names, ", ") }
