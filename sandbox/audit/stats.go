package audit

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TopN is how many entries each ranking in Stats has at most.
const TopN = 10

// Count is how often a name was refused.
type Count struct {
	Name  string `json:"name"`
	Runs  int    `json:"runs"`  // runs that had it at least once: what the ranking is by
	Times int    `json:"times"` // violations in all, a run may repeat one
}

// PolicyTime is the duration of the finished runs of one policy.
type PolicyTime struct {
	Policy   string `json:"policy"`
	Runs     int    `json:"runs"`
	MedianMS int64  `json:"median_ms"` // nearest-rank percentiles of duration_ms
	P95MS    int64  `json:"p95_ms"`
	MaxMS    int64  `json:"max_ms"`
}

// Stats summarises the whole log.
type Stats struct {
	Total          int            `json:"total"`           // rows in the chain, and unfinished ones
	OutOfChain     int            `json:"out_of_chain"`    // finished rows nsbox did not link (not counted anywhere else; Verify reports them)
	Unfinished     int            `json:"unfinished"`      // rows still "unfinished": running, or not yet found orphaned
	SupervisorDied int            `json:"supervisor_died"` // of the "killed" rows, those Reap finished: their supervisor died mid-run
	ByStatus       map[string]int `json:"by_status"`       // rows per status, "unfinished" included
	TopImports     []Count        `json:"top_imports"`
	TopEvents      []Count        `json:"top_events"`
	// NetworkRuns are the rows of runs in network allowlist mode, and
	// RefusedConnections the connections the proxy refused in them.
	NetworkRuns        int          `json:"network_runs"`
	RefusedConnections int64        `json:"refused_connections"`
	TopNetwork         []Count      `json:"top_network"`      // violations of kind network: a refused host:port, a refused socket call
	SlowestPolicies    []PolicyTime `json:"slowest_policies"` // by median, then p95; without the rows Reap finished
}

// Stats counts runs by status (and the killed ones whose supervisor died)
// and the runs with network and their refused connections, ranks the most
// refused imports, audit events and network targets (by the number of runs
// that had them) and the policies whose finished runs take longest. Each
// list has at most TopN entries. It counts what is recorded: Reap first
// for the orphans to count as killed. Only rows in the chain (and the
// unfinished ones, by status) are counted: a row added beside it is only
// counted in OutOfChain.
func (db *DB) Stats() (*Stats, error) {
	s := &Stats{ByStatus: map[string]int{}}
	ctx := context.Background()
	err := db.readTx(ctx, func(q querier) error {
		if err := countStatuses(ctx, q, s); err != nil {
			return err
		}
		var err error
		if s.TopImports, err = topViolations(ctx, q, result.ViolationImport); err != nil {
			return err
		}
		if s.TopEvents, err = topViolations(ctx, q, result.ViolationEvent); err != nil {
			return err
		}
		if s.TopNetwork, err = topViolations(ctx, q, result.ViolationNetwork); err != nil {
			return err
		}
		err = q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(net_refused), 0) FROM runs WHERE network != '' AND seq IS NOT NULL`).
			Scan(&s.NetworkRuns, &s.RefusedConnections)
		if err != nil {
			return fmt.Errorf("count network runs: %w", err)
		}
		s.SlowestPolicies, err = slowestPolicies(ctx, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stats of audit db %s: %w", db.path, err)
	}
	return s, nil
}

func countStatuses(ctx context.Context, q querier, s *Stats) error {
	rows, err := q.QueryContext(ctx, `SELECT status, count(*) FROM runs WHERE `+counted+` GROUP BY status`)
	if err != nil {
		return fmt.Errorf("count statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return fmt.Errorf("count statuses: %w", err)
		}
		s.ByStatus[status] = n
		s.Total += n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count statuses: %w", err)
	}
	s.Unfinished = s.ByStatus[StatusUnfinished]
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE NOT `+counted).Scan(&s.OutOfChain); err != nil {
		return fmt.Errorf("count rows outside the chain: %w", err)
	}
	err = q.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE status = ? AND reason = ? AND seq IS NOT NULL`,
		string(result.StatusKilled), ReasonSupervisorDied).Scan(&s.SupervisorDied)
	if err != nil {
		return fmt.Errorf("count runs whose supervisor died: %w", err)
	}
	return nil
}

func topViolations(ctx context.Context, q querier, kind string) ([]Count, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, count(DISTINCT run_id), count(*) FROM run_violations
		WHERE kind = ? AND run_id IN (SELECT id FROM runs WHERE seq IS NOT NULL)
		GROUP BY name ORDER BY 2 DESC, 3 DESC, name LIMIT ?`, kind, TopN)
	if err != nil {
		return nil, fmt.Errorf("rank %s violations: %w", kind, err)
	}
	defer rows.Close()
	out := []Count{}
	for rows.Next() {
		var c Count
		if err := rows.Scan(&c.Name, &c.Runs, &c.Times); err != nil {
			return nil, fmt.Errorf("rank %s violations: %w", kind, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// slowestPolicies reads the durations sorted by policy and duration, so the
// percentiles are an index into each policy's run. The rows Reap finished
// are left out: their duration is when the orphan was found, not how long
// the policy's program ran.
func slowestPolicies(ctx context.Context, q querier) ([]PolicyTime, error) {
	rows, err := q.QueryContext(ctx, `SELECT policy, duration_ms FROM runs
		WHERE seq IS NOT NULL AND NOT (status = ? AND reason = ?) ORDER BY policy, duration_ms`,
		string(result.StatusKilled), ReasonSupervisorDied)
	if err != nil {
		return nil, fmt.Errorf("read durations: %w", err)
	}
	defer rows.Close()
	out := []PolicyTime{}
	var policy string
	var durations []int64
	flush := func() {
		if len(durations) > 0 {
			out = append(out, PolicyTime{
				Policy: policy, Runs: len(durations), MaxMS: durations[len(durations)-1],
				MedianMS: nearestRank(durations, 0.50), P95MS: nearestRank(durations, 0.95),
			})
		}
	}
	for rows.Next() {
		var p string
		var d int64
		if err := rows.Scan(&p, &d); err != nil {
			return nil, fmt.Errorf("read durations: %w", err)
		}
		if p != policy || durations == nil {
			flush()
			policy, durations = p, []int64{}
		}
		durations = append(durations, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read durations: %w", err)
	}
	flush()
	slices.SortStableFunc(out, func(a, b PolicyTime) int {
		return cmp.Or(cmp.Compare(b.MedianMS, a.MedianMS), cmp.Compare(b.P95MS, a.P95MS), cmp.Compare(a.Policy, b.Policy))
	})
	return out[:min(TopN, len(out))], nil
}

// nearestRank returns the p-th percentile of sorted by the nearest-rank
// method: the smallest value with at least p of the values at or below it.
func nearestRank(sorted []int64, p float64) int64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
