package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// runColumns are the columns every query of runs reads, in scanRun's order.
const runColumns = `id, seq, start_ns, end_ns, duration_ms, policy, policy_sha256, root_manifest_sha256,
	code_sha256, code, status, exit_code, signal, cpu_ms, peak_memory_bytes,
	stdout_bytes, stderr_bytes, stdout_head, stderr_head, stdout_truncated, stderr_truncated,
	nsbox_version, prev_hash, hash, chain_version, reason,
	supervisor_machine_id, supervisor_boot_id, supervisor_pid, supervisor_start_ticks, supervisor_ns,
	network, net_proxy, net_connections_dropped, net_refused, net_bytes_sent, net_bytes_received,
	stdin_sha256, stdin_bytes`

// errStop ends a scan early without an error.
var errStop = errors.New("stop")

// cols decodes the raw values of one row, keeping the first error, which
// names the column: a row edited by hand may hold any type anywhere, and
// Verify must report it as a broken row rather than fail.
type cols struct {
	vals  []any
	names []string
	i     int
	err   error
}

func (c *cols) next() (any, string) {
	v, name := c.vals[c.i], c.names[c.i]
	c.i++
	return v, name
}

func (c *cols) fail(name string, v any, want string) {
	if c.err == nil {
		c.err = fmt.Errorf("column %s holds %T, want %s", name, v, want)
	}
}

func (c *cols) int64() int64 {
	p := c.optInt64()
	if p == nil {
		if c.err == nil {
			c.err = fmt.Errorf("column %s is NULL", c.names[c.i-1])
		}
		return 0
	}
	return *p
}

func (c *cols) optInt64() *int64 {
	v, name := c.next()
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		return &x
	}
	c.fail(name, v, "integer")
	return nil
}

// bool reads an integer that must be 0 or 1: any other value would read as
// one of them and hash alike, so an edit to it is reported here.
func (c *cols) bool() bool {
	v := c.int64()
	if v != 0 && v != 1 && c.err == nil {
		c.err = fmt.Errorf("column %s holds %d, want 0 or 1", c.names[c.i-1], v)
	}
	return v == 1
}

func (c *cols) optInt() *int {
	p := c.optInt64()
	if p == nil {
		return nil
	}
	i := int(*p)
	return &i
}

func (c *cols) str() string {
	p := c.optStr()
	if p == nil {
		return ""
	}
	return *p
}

// optStr accepts TEXT and BLOB alike: the hash covers the bytes, not the
// storage class.
func (c *cols) optStr() *string {
	v, name := c.next()
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return &x
	case []byte:
		s := string(x)
		return &s
	}
	c.fail(name, v, "text")
	return nil
}

func (c *cols) bytes() []byte {
	v, name := c.next()
	switch x := v.(type) {
	case nil:
		return []byte{}
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	c.fail(name, v, "blob")
	return nil
}

// supervisor reads the five supervisor columns: all NULL (none recorded)
// or all set. Begin writes one or the other, so a mix is an edited row.
func (c *cols) supervisor() *Supervisor {
	machine, boot, pid, start, ns := c.optStr(), c.optStr(), c.optInt64(), c.optInt64(), c.optStr()
	switch {
	case machine == nil && boot == nil && pid == nil && start == nil && ns == nil:
		return nil
	case machine == nil || boot == nil || pid == nil || start == nil || ns == nil:
		if c.err == nil {
			c.err = errors.New("supervisor columns partly NULL")
		}
		return nil
	}
	return &Supervisor{MachineID: *machine, BootID: *boot, PID: *pid, StartTicks: *start, Namespaces: *ns}
}

// network reads the six network columns of runs: nil when they are as
// for a run without network (an empty mode and proxy, zeros), so that a row
// without network reads back as it was written, and any other value, an
// edit included, is kept for the hash to judge.
func (c *cols) network() *result.Network {
	n := &result.Network{Mode: c.str(), Proxy: c.str()}
	n.ConnectionsDropped, n.Refused = int(c.int64()), int(c.int64())
	n.BytesSent, n.BytesReceived = c.int64(), c.int64()
	if n.Mode == "" && n.Proxy == "" && n.ConnectionsDropped == 0 && n.Refused == 0 && n.BytesSent == 0 && n.BytesReceived == 0 {
		return nil
	}
	n.Connections = []result.Connection{}
	return n
}

func (c *cols) time() time.Time {
	p := c.optInt64()
	if p == nil {
		return time.Time{}
	}
	return time.Unix(0, *p).UTC()
}

// newCols prepares to read one row of rows into raw values.
func newCols(rows *sql.Rows) (*cols, error) {
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	c := &cols{vals: make([]any, len(names)), names: names}
	ptrs := make([]any, len(names))
	for i := range c.vals {
		ptrs[i] = &c.vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return c, nil
}

// scanRun reads one row of runColumns. The error, if any, is the row's own
// (a column of the wrong type); r still has every field that decoded.
func scanRun(rows *sql.Rows) (r *Run, rowErr error, err error) {
	c, err := newCols(rows)
	if err != nil {
		return nil, nil, err
	}
	r = &Run{}
	r.ID = c.str()
	if seq := c.optInt64(); seq != nil {
		r.Seq = *seq
	}
	r.Start = c.time()
	r.End = c.time()
	r.DurationMS = c.int64()
	r.Policy = c.str()
	r.PolicySHA256 = c.str()
	r.RootManifestSHA256 = c.str()
	r.CodeSHA256 = c.str()
	r.Code = c.optStr()
	r.Status = c.str()
	r.ExitCode = c.optInt()
	r.Signal = c.optInt()
	r.CPUMS = c.optInt64()
	r.PeakMemoryBytes = c.optInt64()
	r.StdoutBytes = c.int64()
	r.StderrBytes = c.int64()
	r.StdoutHead = c.bytes()
	r.StderrHead = c.bytes()
	r.StdoutTruncated = c.int64() != 0
	r.StderrTruncated = c.int64() != 0
	r.NsboxVersion = c.str()
	r.PrevHash = c.str()
	r.Hash = c.str()
	r.ChainVersion = int(c.int64())
	r.Reason = c.str()
	r.Supervisor = c.supervisor()
	r.Network = c.network()
	r.StdinSHA256 = c.str()
	r.StdinBytes = c.int64()
	r.Violations = []result.Violation{}
	r.Labels = map[string]string{}
	return r, c.err, nil
}

// queryRuns runs a query of runColumns and loads each row's labels and
// violations. Row errors are returned per row, in rowErrs, by id.
func queryRuns(ctx context.Context, q querier, query string, args ...any) (runs []*Run, rowErrs map[string]error, err error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	rowErrs = map[string]error{}
	for rows.Next() {
		r, rerr, err := scanRun(rows)
		if err != nil {
			return nil, nil, err
		}
		if rerr != nil {
			rowErrs[r.ID] = rerr
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows.Close()
	if err := loadChildren(ctx, q, runs, rowErrs); err != nil {
		return nil, nil, err
	}
	return runs, rowErrs, nil
}

// loadChildren fills the labels, violations and connections of runs, a few hundred ids
// per query (SQLite's limit on parameters is far above that).
func loadChildren(ctx context.Context, q querier, runs []*Run, rowErrs map[string]error) error {
	const chunk = 256
	for len(runs) > 0 {
		n := min(chunk, len(runs))
		byID := make(map[string]*Run, n)
		ids := make([]any, 0, n)
		for _, r := range runs[:n] {
			byID[r.ID] = r
			ids = append(ids, r.ID)
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
		if err := loadLabels(ctx, q, in, ids, byID, rowErrs); err != nil {
			return err
		}
		if err := loadViolations(ctx, q, in, ids, byID, rowErrs); err != nil {
			return err
		}
		if err := loadConnections(ctx, q, in, ids, byID, rowErrs); err != nil {
			return err
		}
		runs = runs[n:]
	}
	return nil
}

func loadLabels(ctx context.Context, q querier, in string, ids []any, byID map[string]*Run, rowErrs map[string]error) error {
	rows, err := q.QueryContext(ctx, `SELECT run_id, key, value FROM run_labels WHERE run_id IN `+in, ids...)
	if err != nil {
		return fmt.Errorf("read labels: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := newCols(rows)
		if err != nil {
			return fmt.Errorf("read labels: %w", err)
		}
		id, k, v := c.str(), c.str(), c.str()
		r := byID[id]
		if r == nil {
			continue
		}
		if c.err != nil && rowErrs[id] == nil {
			rowErrs[id] = fmt.Errorf("label %q: %w", k, c.err)
		}
		r.Labels[k] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read labels: %w", err)
	}
	return nil
}

func loadViolations(ctx context.Context, q querier, in string, ids []any, byID map[string]*Run, rowErrs map[string]error) error {
	rows, err := q.QueryContext(ctx, `SELECT run_id, idx, kind, name, line, col, detail
		FROM run_violations WHERE run_id IN `+in+` ORDER BY run_id, idx`, ids...)
	if err != nil {
		return fmt.Errorf("read violations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := newCols(rows)
		if err != nil {
			return fmt.Errorf("read violations: %w", err)
		}
		id := c.str()
		idx := c.int64()
		v := result.Violation{Kind: c.str(), Name: c.str()}
		v.Line, v.Col = int(c.int64()), int(c.int64())
		v.Detail = c.str()
		r := byID[id]
		if r == nil {
			continue
		}
		// idx must count from 0 without gaps: a removed violation is an
		// edit of the row.
		if c.err == nil && idx != int64(len(r.Violations)) {
			c.err = fmt.Errorf("violation idx %d where %d was expected", idx, len(r.Violations))
		}
		if c.err != nil && rowErrs[id] == nil {
			rowErrs[id] = fmt.Errorf("violation: %w", c.err)
		}
		r.Violations = append(r.Violations, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read violations: %w", err)
	}
	return nil
}

// loadConnections fills r.Network.Connections. A run with connections but
// no network columns set (an edited row) gets a Network with an empty mode,
// which its hash does not match.
func loadConnections(ctx context.Context, q querier, in string, ids []any, byID map[string]*Run, rowErrs map[string]error) error {
	rows, err := q.QueryContext(ctx, `SELECT run_id, idx, host, port, method, address, allowed, reason,
			bytes_sent, bytes_received, start_ms, duration_ms
		FROM run_connections WHERE run_id IN `+in+` ORDER BY run_id, idx`, ids...)
	if err != nil {
		return fmt.Errorf("read connections: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := newCols(rows)
		if err != nil {
			return fmt.Errorf("read connections: %w", err)
		}
		id := c.str()
		idx := c.int64()
		conn := result.Connection{Host: c.str(), Port: int(c.int64()), Method: c.str(), Address: c.str()}
		conn.Allowed = c.bool()
		conn.Reason = c.str()
		conn.BytesSent, conn.BytesReceived = c.int64(), c.int64()
		conn.StartMS, conn.DurationMS = c.int64(), c.int64()
		r := byID[id]
		if r == nil {
			continue
		}
		if r.Network == nil {
			r.Network = &result.Network{Connections: []result.Connection{}}
		}
		// idx counts from 0 without gaps, as for violations.
		if c.err == nil && idx != int64(len(r.Network.Connections)) {
			c.err = fmt.Errorf("connection idx %d where %d was expected", idx, len(r.Network.Connections))
		}
		if c.err != nil && rowErrs[id] == nil {
			rowErrs[id] = fmt.Errorf("connection: %w", c.err)
		}
		r.Network.Connections = append(r.Network.Connections, conn)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read connections: %w", err)
	}
	return nil
}

// scanChain calls fn for every finished row in seq order, with the row's
// own decoding error if any, a batch at a time. fn returning errStop ends
// the scan without an error.
func scanChain(ctx context.Context, q querier, fn func(r *Run, rowErr error) error) error {
	const batch = 512
	var after int64
	for {
		runs, rowErrs, err := queryRuns(ctx, q,
			`SELECT `+runColumns+` FROM runs WHERE seq > ? ORDER BY seq LIMIT ?`, after, batch)
		if err != nil {
			return fmt.Errorf("read runs after seq %d: %w", after, err)
		}
		for _, r := range runs {
			if err := fn(r, rowErrs[r.ID]); errors.Is(err, errStop) {
				return nil
			} else if err != nil {
				return err
			}
		}
		if len(runs) == 0 {
			return nil
		}
		last := runs[len(runs)-1].Seq
		// A seq that does not grow (a row edited into a non-integer seq
		// reads as 0) ends the scan rather than looping on it.
		if len(runs) < batch || last <= after {
			return nil
		}
		after = last
	}
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
