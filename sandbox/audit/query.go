package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Errors of Get.
var (
	ErrNotFound  = errors.New("no such run")
	ErrAmbiguous = errors.New("ambiguous run id prefix")
)

// Filter selects runs for List. The zero Filter selects every run.
type Filter struct {
	Since      time.Duration     // only runs started within this long before now; 0 for all
	Status     string            // only runs with this status ("unfinished" included); "" for all
	Violations bool              // only runs with at least one violation
	Labels     map[string]string // only runs with every one of these labels
	// Host: only runs that opened a connection through the proxy to this
	// host, allowed or refused; names compare without regard to ASCII
	// case, as DNS names do. "" for all.
	Host  string
	Limit int // at most this many runs; 0 or less for all
}

// List returns the runs f selects, newest start first, with their labels,
// violations and connections: of the rows in the chain and the unfinished
// ones (a finished row nsbox did not link is not listed).
func (db *DB) List(f Filter) ([]Run, error) {
	runs, err := db.list(f)
	if err != nil {
		return nil, fmt.Errorf("list runs in audit db %s: %w", db.path, err)
	}
	return runs, nil
}

func (db *DB) list(f Filter) ([]Run, error) {
	query, args := listQuery(f)
	var out []Run
	err := db.readTx(context.Background(), func(q querier) error {
		runs, rowErrs, err := queryRuns(context.Background(), q, query, args...)
		if err != nil {
			return err
		}
		out = make([]Run, 0, len(runs))
		for _, r := range runs {
			if err := rowErrs[r.ID]; err != nil {
				return fmt.Errorf("run %s: %w", r.ID, err)
			}
			out = append(out, *r)
		}
		return nil
	})
	return out, err
}

// listQuery is the statement of List(f) and its arguments.
func listQuery(f Filter) (string, []any) {
	// Rows in the chain and unfinished ones; a finished row nsbox did
	// not link is not listed (Verify reports it).
	where := []string{counted}
	var args []any
	if f.Since > 0 {
		where = append(where, `start_ns >= ?`)
		args = append(args, time.Now().Add(-f.Since).UnixNano())
	}
	if f.Status != "" {
		where = append(where, `status = ?`)
		args = append(args, f.Status)
	}
	if f.Violations {
		where = append(where, `EXISTS (SELECT 1 FROM run_violations v WHERE v.run_id = runs.id)`)
	}
	if f.Host != "" {
		// IN rather than a correlated EXISTS: the host index finds the
		// few runs that talked to it without a probe per run.
		where = append(where, `id IN (SELECT run_id FROM run_connections WHERE host = ? COLLATE NOCASE)`)
		args = append(args, f.Host)
	}
	// Sorted, so one filter is always the same statement.
	for _, k := range slices.Sorted(maps.Keys(f.Labels)) {
		where = append(where, `EXISTS (SELECT 1 FROM run_labels l WHERE l.run_id = runs.id AND l.key = ? AND l.value = ?)`)
		args = append(args, k, f.Labels[k])
	}
	query := `SELECT ` + runColumns + ` FROM runs WHERE ` + strings.Join(where, ` AND `)
	query += ` ORDER BY start_ns DESC, id DESC`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return query, args
}

// Get returns the run with this id or, failing that, the only run whose id
// starts with it (ErrNotFound, ErrAmbiguous otherwise).
func (db *DB) Get(id string) (*Run, error) {
	r, err := db.get(id)
	if err != nil {
		return nil, fmt.Errorf("get run %q from audit db %s: %w", id, db.path, err)
	}
	return r, nil
}

func (db *DB) get(prefix string) (*Run, error) {
	if prefix == "" {
		return nil, fmt.Errorf("%w: empty id", ErrNotFound)
	}
	// A range on the primary key: ids in [prefix, the next string after
	// every string with that prefix). The exact id, if present, is the
	// smallest of them, so it comes first.
	query := `SELECT ` + runColumns + ` FROM runs WHERE id >= ?`
	args := []any{prefix}
	if end, ok := prefixEnd(prefix); ok {
		query += ` AND id < ?`
		args = append(args, end)
	}
	query += ` ORDER BY id LIMIT 2`
	var found *Run
	err := db.readTx(context.Background(), func(q querier) error {
		runs, rowErrs, err := queryRuns(context.Background(), q, query, args...)
		switch {
		case err != nil:
			return err
		case len(runs) == 0:
			return ErrNotFound
		case len(runs) == 2 && runs[0].ID != prefix:
			return fmt.Errorf("%w: matches %s and %s at least", ErrAmbiguous, runs[0].ID, runs[1].ID)
		}
		if err := rowErrs[runs[0].ID]; err != nil {
			return fmt.Errorf("run %s: %w", runs[0].ID, err)
		}
		found = runs[0]
		return nil
	})
	return found, err
}

// prefixEnd returns the smallest string greater than every string starting
// with p, bytewise as SQLite compares text; false when there is none (p is
// all 0xff bytes).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// Export writes every run as one JSON object per line (MarshalJSON): the
// finished runs in chain (seq) order, then the unfinished ones by start.
// It reads one snapshot, so rows finished meanwhile are not half-exported.
func (db *DB) Export(w io.Writer) error {
	if err := db.export(w); err != nil {
		return fmt.Errorf("export audit db %s: %w", db.path, err)
	}
	return nil
}

func (db *DB) export(w io.Writer) error {
	bw := bufio.NewWriter(w)
	write := func(r *Run) error {
		b, err := r.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode run %s: %w", r.ID, err)
		}
		bw.Write(b)
		return bw.WriteByte('\n')
	}
	ctx := context.Background()
	err := db.readTx(ctx, func(q querier) error {
		err := scanChain(ctx, q, func(r *Run, rowErr error) error {
			if rowErr != nil {
				return fmt.Errorf("run %s: %w", r.ID, rowErr)
			}
			return write(r)
		})
		if err != nil {
			return err
		}
		runs, rowErrs, err := queryRuns(ctx, q,
			`SELECT `+runColumns+` FROM runs WHERE seq IS NULL ORDER BY start_ns, id`)
		if err != nil {
			return fmt.Errorf("read unfinished runs: %w", err)
		}
		for _, r := range runs {
			if err := rowErrs[r.ID]; err != nil {
				return fmt.Errorf("run %s: %w", r.ID, err)
			}
			if err := write(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
