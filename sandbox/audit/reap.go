package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// ReapLimits bound the work of one Reap call. Zero values mean no limit.
type ReapLimits struct {
	Check  int // unfinished rows looked at, oldest first
	Finish int // rows finished
}

// ReapInRun is what a run spends on other runs' rows: a few dozen checks
// (a kill(2) and a read of /proc each) and a few rows finished, so that a
// log with many orphans is caught up over a few runs rather than slowing
// one down. The nsbox audit commands reap without limits.
var ReapInRun = ReapLimits{Check: 64, Finish: 8}

// reapPage is how many unfinished rows one query reads.
const reapPage = 256

// reapBusyWait is how long one attempt to finish an orphan waits for the
// write lock; Reap retries until its context ends, so a deadline in the
// context bounds it to about that plus this.
const reapBusyWait = 50 * time.Millisecond

// Reap finishes the unfinished rows whose supervisor is gone for good
// (package doc: Orphaned rows): status killed, reason ReasonSupervisorDied,
// end the latest time the supervisor can have died, linked into the chain
// like any finished row. A row whose supervisor is alive, or cannot be
// judged from this process, is left alone. It returns how many rows it
// finished. Concurrent reapers, and the row's own Finish, never finish a row
// twice: each row is finished in its own write transaction, which reads the
// row again and does nothing when it is no longer unfinished.
func (db *DB) Reap(ctx context.Context, lim ReapLimits) (int, error) {
	n, err := db.reap(ctx, lim)
	if err != nil {
		return n, fmt.Errorf("reap orphaned runs in audit db %s: %w", db.path, err)
	}
	return n, nil
}

// candidate is an unfinished row, as much as judging it takes.
type candidate struct {
	id      string
	startNS int64 // as stored: where the next page starts
	start   time.Time
	sup     *Supervisor
}

func (db *DB) reap(ctx context.Context, lim ReapLimits) (int, error) {
	h := thisHost()
	finished, checked := 0, 0
	var skipped []error // rows that could not be read: the rest goes on
	after := candidate{startNS: math.MinInt64}
	for {
		size := reapPage
		if lim.Check > 0 {
			size = min(size, lim.Check-checked)
		}
		if size <= 0 {
			break
		}
		page, bad, err := db.candidates(ctx, after, size)
		if err != nil {
			return finished, err
		}
		skipped = append(skipped, bad...)
		for _, c := range page.rows {
			now := time.Now()
			v := h.judge(c.sup, c.start, now)
			if !v.dead {
				continue
			}
			ok, err := db.finishOrphan(ctx, c, v, now)
			var rowErr *unreadableRow
			switch {
			case errors.As(err, &rowErr):
				skipped = append(skipped, err)
				continue
			case err != nil:
				return finished, errors.Join(append([]error{err}, skipped...)...)
			}
			if ok {
				finished++
				if lim.Finish > 0 && finished >= lim.Finish {
					return finished, errors.Join(skipped...)
				}
			}
		}
		checked += page.read
		if page.read < size {
			break
		}
		after = page.last
	}
	return finished, errors.Join(skipped...)
}

// candidatePage is one query's worth of unfinished rows.
type candidatePage struct {
	rows []candidate
	read int       // rows read, including those that could not be decoded
	last candidate // the last row read: the next page starts after it
}

// candidates reads up to n unfinished rows after the given one, oldest
// first; the status index finds them among the finished ones. Rows whose
// columns do not decode are returned as errors (a start that is not an
// integer is not even read, so that paging always moves on).
func (db *DB) candidates(ctx context.Context, after candidate, n int) (candidatePage, []error, error) {
	var p candidatePage
	rows, err := db.sql.QueryContext(ctx, `SELECT id, start_ns,
			supervisor_machine_id, supervisor_boot_id, supervisor_pid, supervisor_start_ticks, supervisor_ns
		FROM runs WHERE status = ? AND seq IS NULL AND typeof(start_ns) = 'integer' AND (start_ns, id) > (?, ?)
		ORDER BY start_ns, id LIMIT ?`,
		StatusUnfinished, after.startNS, after.id, n)
	if err != nil {
		return p, nil, fmt.Errorf("read unfinished runs: %w", err)
	}
	defer rows.Close()
	var bad []error
	for rows.Next() {
		c, err := newCols(rows)
		if err != nil {
			return p, nil, fmt.Errorf("read unfinished runs: %w", err)
		}
		cand := candidate{id: c.str()}
		if ns := c.optInt64(); ns != nil {
			cand.startNS, cand.start = *ns, time.Unix(0, *ns).UTC()
		}
		cand.sup = c.supervisor()
		p.read++
		p.last = cand
		if c.err != nil {
			bad = append(bad, &unreadableRow{id: cand.id, err: c.err})
			continue
		}
		p.rows = append(p.rows, cand)
	}
	if err := rows.Err(); err != nil {
		return p, nil, fmt.Errorf("read unfinished runs: %w", err)
	}
	return p, bad, nil
}

// unreadableRow is a row Reap skipped because a column does not decode (an
// edit by hand): the other rows are still reaped.
type unreadableRow struct {
	id  string
	err error
}

func (e *unreadableRow) Error() string { return fmt.Sprintf("run %s: %v", e.id, e.err) }
func (e *unreadableRow) Unwrap() error { return e.err }

// finishOrphan finishes the row of c, judged dead by v at found, in one
// write transaction; false when the row was no longer unfinished (its own
// Finish or another reaper came first) or no longer the row judged.
func (db *DB) finishOrphan(ctx context.Context, c candidate, v verdict, found time.Time) (bool, error) {
	var done bool
	err := db.writeTxWait(ctx, reapBusyWait, func(tx *sql.Tx) error {
		done = false
		runs, rowErrs, err := queryRuns(ctx, tx,
			`SELECT `+runColumns+` FROM runs WHERE id = ? AND seq IS NULL AND status = ?`, c.id, StatusUnfinished)
		if err != nil {
			return fmt.Errorf("read run %s: %w", c.id, err)
		}
		if len(runs) == 0 {
			return nil
		}
		r := runs[0]
		if err := rowErrs[r.ID]; err != nil {
			return &unreadableRow{id: r.ID, err: err}
		}
		if !r.Start.Equal(c.start) || !sameSupervisor(r.Supervisor, c.sup) {
			return nil
		}
		// What Begin recorded stays (policy, hashes, code, labels); the
		// rest says what is known: killed, when at the latest, and why.
		r.Status = string(result.StatusKilled)
		r.Reason = ReasonSupervisorDied
		r.End = deathBound(v.by, r.Start, found)
		r.DurationMS = r.End.Sub(r.Start).Milliseconds()
		if err := link(ctx, tx, r); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done, err
}

// deathBound is the end recorded for an orphan: the evidence's bound,
// never after the moment it was found nor before the run started (a clock
// stepped back).
func deathBound(by, start, found time.Time) time.Time {
	end := found
	if !by.IsZero() && by.Before(found) {
		end = by
	}
	if end.Before(start) {
		end = start
	}
	return end
}

func sameSupervisor(a, b *Supervisor) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
