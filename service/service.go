// Package service is nsbox serve: a versioned JSON API over HTTP, on a
// Unix socket or on TCP with a bearer token, for callers that drive nsbox
// as a service rather than a command. Each run it serves is a job.Run,
// exactly as `nsbox run` does it: the same steps, the same audit row, the
// same result object.
//
// The API is described by docs/api/openapi.json, which the server serves
// at /v1/openapi.json; a test keeps the document, the routes below and
// the responses in step. The limits are the Config's: a request past one
// is answered 413 or 429 with a JSON error, never by failing the service.
//
// The server uses the standard library's net/http alone. Shutdown drains:
// the listener closes, runs in flight finish (or reach their timeout),
// then it returns; Stop, after it, ends the runs still going (status
// killed).
package service

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apidoc "github.com/nsbox/nsbox/docs/api"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/session"
	"github.com/nsbox/nsbox/service/launch"
)

// Defaults of the limits (documented in docs/api.md and the flags' help).
const (
	DefaultMaxBody           = launch.DefaultMaxBody
	DefaultMaxConcurrentRuns = launch.DefaultMaxConcurrentRuns
	DefaultMaxSessions       = launch.DefaultMaxSessions
)

// Config is what one server serves and how much.
type Config struct {
	// Policies are the policies clients may name, by the name they use
	// (a built-in's name, or a policy file's path as the operator listed
	// it). A request for another is refused (403).
	Policies map[string]*policies.Policy
	// MaxBody bounds a request body in bytes (413 past it);
	// MaxConcurrentRuns the runs at once (429 past it).
	MaxBody           int64
	MaxConcurrentRuns int
	// MaxSessions bounds the sessions open at once (429 past it).
	MaxSessions int
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); unset, the socket's permissions are
	// the access control.
	Token []byte
	// AuditDB is the audit log's path ("" for audit.Path's default).
	AuditDB string
	// Log receives one line per request and nsbox's own messages about
	// runs; nil discards them.
	Log io.Writer
	// Version is reported by /v1/health.
	Version string
	// Command prefixes the log's lines ("nsbox serve" when empty).
	Command string
	// Pool is how many sandboxes of each policy are kept started ahead
	// for one-shot runs (pool.go); 0 keeps none.
	Pool int
}

// Server serves the API. Make it with New.
type Server struct {
	cfg     Config
	runs    chan struct{} // a slot per run in flight
	active  atomic.Int64  // runs in flight
	log     *log.Logger
	http    *http.Server
	mux     *http.ServeMux
	stop    context.Context // cancelled by Stop: runs still going are killed
	cancel  context.CancelCauseFunc
	token   [sha256.Size]byte
	started time.Time
	pools   *pools

	sessions sessionTable
	metrics  *metrics
	mcp      *mcpDoor // the MCP tools (mcp.go)

	// audit is the audit log, open for the server's life: a run's answer
	// waits for its row, not for opening the database.
	audit *job.AuditLog
	// teardowns are the runs' teardowns still going after their answers
	// (job.Request.Later); Shutdown waits for them.
	teardowns sync.WaitGroup
}

// route is one endpoint: a method on a path, as docs/api/openapi.json
// lists it.
type route struct {
	method, path string
	handle       func(*Server, http.ResponseWriter, *http.Request)
}

// routes are every endpoint the server has; the OpenAPI document lists
// exactly these (a test checks).
var routes = []route{
	{http.MethodPost, "/v1/runs", (*Server).postRun},
	{http.MethodGet, "/v1/health", (*Server).getHealth},
	{http.MethodGet, "/v1/openapi.json", (*Server).getOpenAPI},
	{http.MethodGet, "/v1/metrics", (*Server).getMetrics},
	{http.MethodPost, "/v1/sessions", (*Server).postSession},
	{http.MethodGet, "/v1/sessions", (*Server).getSessions},
	{http.MethodGet, "/v1/sessions/{id}", (*Server).getSession},
	{http.MethodDelete, "/v1/sessions/{id}", (*Server).deleteSession},
	{http.MethodPost, "/v1/sessions/{id}/cells", (*Server).postCell},
	{http.MethodPost, "/v1/sessions/{id}/interrupt", (*Server).postInterrupt},
	{http.MethodGet, "/v1/sessions/{id}/files", (*Server).getFiles},
	{http.MethodPut, "/v1/sessions/{id}/files/{path...}", (*Server).putFile},
	{http.MethodGet, "/v1/sessions/{id}/files/{path...}", (*Server).getFile},
	{http.MethodDelete, "/v1/sessions/{id}/files/{path...}", (*Server).deleteFile},
}

// New returns a server for cfg, with the defaults of unset limits.
func New(cfg Config) (*Server, error) {
	if len(cfg.Policies) == 0 {
		return nil, errors.New("no policy to serve")
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxConcurrentRuns == 0 {
		cfg.MaxConcurrentRuns = DefaultMaxConcurrentRuns
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxBody < 0 || cfg.MaxConcurrentRuns < 0 || cfg.MaxSessions < 0 {
		return nil, fmt.Errorf("limits must be positive (max body %d, max concurrent runs %d, max sessions %d)", cfg.MaxBody, cfg.MaxConcurrentRuns, cfg.MaxSessions)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &Server{
		cfg:     cfg,
		runs:    make(chan struct{}, cfg.MaxConcurrentRuns),
		log:     log.New(cfg.Log, cmp.Or(cfg.Command, "nsbox serve")+": ", log.LstdFlags|log.Lmsgprefix),
		mux:     http.NewServeMux(),
		started: time.Now(),
	}
	s.sessions.byID = map[string]*session.Session{}
	s.metrics = newMetrics()
	s.stop, s.cancel = context.WithCancelCause(context.Background())
	if cfg.Pool < 0 || cfg.Pool > MaxPool {
		return nil, fmt.Errorf("pool %d: from 0 to %d sandboxes per policy", cfg.Pool, MaxPool)
	}
	al, err := job.OpenAuditLog(cfg.AuditDB)
	if err != nil {
		return nil, err
	}
	s.audit = al
	s.pools = newPools(cfg, s.log, s.SetPoolSize, s.metrics.sessionPool)
	if cfg.Token != nil {
		s.token = sha256.Sum256(cfg.Token)
	}
	// One handler per path, which answers a method it does not have
	// with a JSON 405 (the mux's own would be text); anything else is a
	// JSON 404.
	byPath := map[string][]route{}
	for _, rt := range routes {
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for p, rts := range byPath {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			for _, rt := range rts {
				if r.Method == rt.method {
					if rec, ok := w.(*statusRecorder); ok {
						rec.route = routeKey{rt.method, strings.ReplaceAll(rt.path, "...}", "}")}
					}
					rt.handle(s, w, r)
					return
				}
			}
			var allow []string
			for _, rt := range rts {
				allow = append(allow, rt.method)
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: allowed: %s", r.Method, p, strings.Join(allow, ", ")))
		})
	}
	// The MCP door: not a route of the API document (its protocol is
	// MCP's), behind the same token check.
	mcpDoor, err := newMCPDoor(s)
	if err != nil {
		return nil, err
	}
	s.mcp = mcpDoor
	s.mux.Handle("/mcp", s.mcpHandler())
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s (see /v1/openapi.json)", r.URL.Path))
	})
	s.http = &http.Server{
		Handler: s.Handler(),
		// A client that sends its headers slowly must not hold a
		// connection forever; bodies are bounded by MaxBody and read
		// within ReadTimeout (net/http lifts it once the body is read:
		// it does not bound the run). Responses have no write timeout:
		// a run takes as long as its timeout allows.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log,
	}
	s.http.RegisterOnShutdown(s.closeMCP)
	return s, nil
}

// Handler is the API with authentication and the request log, for Serve
// or a test server.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK, route: routeKey{"other", "other"}}
		if s.cfg.Token != nil && !s.authorized(r) {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="nsbox"`)
			writeError(rec, http.StatusUnauthorized, "unauthorized", "this service needs Authorization: Bearer TOKEN")
		} else if dotSegments(r.URL.Path) {
			// The mux would clean the path and redirect there: a
			// workspace path with ".." is refused, never followed.
			writeError(rec, http.StatusBadRequest, "path_refused", fmt.Sprintf("%s: a path with . or .. segments", r.URL.Path))
		} else {
			s.mux.ServeHTTP(rec, r)
		}
		took := time.Since(start)
		s.metrics.request(rec.route, rec.status, took)
		s.log.Printf("%s %s %d %s", r.Method, r.URL.Path, rec.status, took.Round(time.Millisecond))
	})
}

// dotSegments reports whether path has a "." or ".." segment.
func dotSegments(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// authorized reports whether r carries the token. Both sides are hashed
// first, so the comparison takes the same time whatever the length of
// what the client sent.
func (s *Server) authorized(r *http.Request) bool {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(v))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// Serve serves the API on ln until Shutdown; it returns nil then.
func (s *Server) Serve(ln net.Listener) error {
	s.pools.start()
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown drains: it closes the listeners, refuses new requests, and
// waits for the requests in flight (runs and cells included, each bounded
// by its timeout) until ctx ends; then it ends every session (nothing of
// them is left) and returns ctx's error, if any.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	s.pools.close() // after the runs: none can take a sandbox any more
	s.closeSessions()
	s.closeAudit()
	return err
}

// closeAudit waits for the teardowns still going after their answers,
// then closes the audit log: the last step of a drain.
func (s *Server) closeAudit() {
	s.teardowns.Wait()
	if err := s.audit.Close(); err != nil {
		s.log.Printf("audit log: %v", err)
	}
}

// later runs a run's teardown after its answer (job.Request.Later). A
// teardown that fails leaves something of the run on the host: the log
// names it, and the metrics count it; the next start cleans up.
func (s *Server) later(teardown func() error) {
	s.teardowns.Add(1)
	go func() {
		defer s.teardowns.Done()
		if err := teardown(); err != nil {
			s.log.Printf("teardown after the answer: %v", err)
			s.metrics.teardownFailed()
		}
	}()
}

// Stop kills the runs still in flight (status killed, with why as the
// reason): a second signal after Shutdown began.
func (s *Server) Stop(why error) {
	s.cancel(why)
}

// statusRecorder remembers the status a handler wrote, for the log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	route  routeKey // the route that answered, for the metrics
}

// Unwrap lets http.ResponseController reach the connection's writer (a
// streamed answer flushes each line).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers with status and {"error": {code, message}}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// writeJSON answers with status and v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away: nothing to tell it
}

// health is GET /v1/health's body.
type health struct {
	Status       string   `json:"status"`
	Version      string   `json:"version"`
	Policies     []string `json:"policies"`
	RunsActive   int64    `json:"runs_active"`
	MaxRuns      int      `json:"max_concurrent_runs"`
	SessionsOpen int      `json:"sessions_open"`
	MaxSessions  int      `json:"max_sessions"`
	UptimeS      int64    `json:"uptime_s"`
}

func (s *Server) getHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, health{
		Status: "ok", Version: s.cfg.Version, Policies: s.policyNames(),
		RunsActive: s.active.Load(), MaxRuns: s.cfg.MaxConcurrentRuns,
		SessionsOpen: s.sessions.count(), MaxSessions: s.cfg.MaxSessions,
		UptimeS: int64(time.Since(s.started).Seconds()),
	})
}

func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(apidoc.OpenAPI)
}
