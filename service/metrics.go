package service

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// latencyBuckets are the upper bounds, in seconds, of the request latency
// histogram: from a health check to a run at a long timeout.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// metrics are the service's counters, written by hand in the Prometheus
// text format (version 0.0.4) by GET /v1/metrics: no client library for
// a handful of series.
type metrics struct {
	mu       sync.Mutex
	runs     map[string]int64           // one-shot runs by status
	cells    map[string]int64           // session cells by status
	latency  map[routeKey]*histogram    // requests by route
	pool     map[string]int64           // waiting sandboxes by policy (SetPoolSize)
	sessPool map[string]int64           // sessions opened ahead by policy
	requests map[routeKey]map[int]int64 // requests by route and status code
	teardown int64                      // teardowns after an answer that failed
}

// routeKey is a route as the document names it, or "other" for a request
// that matched none.
type routeKey struct{ method, path string }

type histogram struct {
	counts []int64 // per bucket, not cumulative; one more for +Inf
	sum    float64
	n      int64
}

func newMetrics() *metrics {
	return &metrics{runs: map[string]int64{}, cells: map[string]int64{}, latency: map[routeKey]*histogram{},
		pool: map[string]int64{}, sessPool: map[string]int64{}, requests: map[routeKey]map[int]int64{}}
}

func (m *metrics) teardownFailed() {
	m.mu.Lock()
	m.teardown++
	m.mu.Unlock()
}

func (m *metrics) sessionPool(policy string, waiting int) {
	m.mu.Lock()
	m.sessPool[policy] = int64(waiting)
	m.mu.Unlock()
}

func (m *metrics) run(status string) {
	m.mu.Lock()
	m.runs[status]++
	m.mu.Unlock()
}

func (m *metrics) cell(status string) {
	m.mu.Lock()
	m.cells[status]++
	m.mu.Unlock()
}

// request records one answered request.
func (m *metrics) request(k routeKey, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.latency[k]
	if h == nil {
		h = &histogram{counts: make([]int64, len(latencyBuckets)+1)}
		m.latency[k] = h
	}
	s := d.Seconds()
	i, _ := slices.BinarySearch(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
	h.n++
	if m.requests[k] == nil {
		m.requests[k] = map[int]int64{}
	}
	m.requests[k][code]++
}

// SetPoolSize reports how many prepared sandboxes of policy wait in its
// pool now, for GET /v1/metrics (nsbox_pool_waiting). The pool calls it
// whenever the number changes.
func (s *Server) SetPoolSize(policy string, waiting int) {
	s.metrics.mu.Lock()
	s.metrics.pool[policy] = int64(waiting)
	s.metrics.mu.Unlock()
}

// write writes every series in the text format, sorted, so that two
// scrapes of an idle service are the same text.
func (m *metrics) write(w io.Writer, sessionsOpen, runsActive int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family("nsbox_runs_total", "counter", "One-shot runs (POST /v1/runs) by result status.")
	for _, st := range slices.Sorted(maps.Keys(m.runs)) {
		fmt.Fprintf(&b, "nsbox_runs_total{status=%s} %d\n", quote(st), m.runs[st])
	}
	family("nsbox_cells_total", "counter", "Session cells by result status.")
	for _, st := range slices.Sorted(maps.Keys(m.cells)) {
		fmt.Fprintf(&b, "nsbox_cells_total{status=%s} %d\n", quote(st), m.cells[st])
	}
	family("nsbox_runs_active", "gauge", "One-shot runs in flight.")
	fmt.Fprintf(&b, "nsbox_runs_active %d\n", runsActive)
	family("nsbox_sessions_open", "gauge", "Sessions open.")
	fmt.Fprintf(&b, "nsbox_sessions_open %d\n", sessionsOpen)
	family("nsbox_pool_waiting", "gauge", "Prepared sandboxes waiting in each policy's pool.")
	for _, p := range slices.Sorted(maps.Keys(m.pool)) {
		fmt.Fprintf(&b, "nsbox_pool_waiting{policy=%s} %d\n", quote(p), m.pool[p])
	}
	family("nsbox_session_pool_waiting", "gauge", "Sessions opened ahead, waiting in each policy's pool.")
	for _, p := range slices.Sorted(maps.Keys(m.sessPool)) {
		fmt.Fprintf(&b, "nsbox_session_pool_waiting{policy=%s} %d\n", quote(p), m.sessPool[p])
	}
	family("nsbox_teardown_failures_total", "counter", "Run teardowns, done after the answer, that left something on the host (the log names it).")
	fmt.Fprintf(&b, "nsbox_teardown_failures_total %d\n", m.teardown)
	keys := slices.SortedFunc(maps.Keys(m.latency), func(a, b routeKey) int {
		return strings.Compare(a.path+" "+a.method, b.path+" "+b.method)
	})
	family("nsbox_http_requests_total", "counter", "Requests answered, by route and status code.")
	for _, k := range keys {
		for _, code := range slices.Sorted(maps.Keys(m.requests[k])) {
			fmt.Fprintf(&b, "nsbox_http_requests_total{method=%s,route=%s,code=\"%d\"} %d\n", quote(k.method), quote(k.path), code, m.requests[k][code])
		}
	}
	family("nsbox_http_request_duration_seconds", "histogram", "Time from a request's arrival to the end of its answer, by route.")
	for _, k := range keys {
		h := m.latency[k]
		labels := fmt.Sprintf("method=%s,route=%s", quote(k.method), quote(k.path))
		var cum int64
		for i, ub := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(&b, "nsbox_http_request_duration_seconds_bucket{%s,le=\"%s\"} %d\n", labels, strconv.FormatFloat(ub, 'g', -1, 64), cum)
		}
		fmt.Fprintf(&b, "nsbox_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %d\n", labels, h.n)
		fmt.Fprintf(&b, "nsbox_http_request_duration_seconds_sum{%s} %s\n", labels, strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(&b, "nsbox_http_request_duration_seconds_count{%s} %d\n", labels, h.n)
	}
	_, _ = io.WriteString(w, b.String())
}

// quote is a label value in the text format: backslash, double quote and
// newline escaped.
func quote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	s.metrics.write(w, int64(s.sessions.count()), s.active.Load())
}
