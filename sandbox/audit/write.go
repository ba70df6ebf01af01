package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// ErrFinished is returned by Finish for a run that was already finished:
// a row joins the chain once.
var ErrFinished = errors.New("run already finished")

// Begin records the start of run r with status StatusUnfinished (which it
// also sets in r), so that a supervisor killed mid-run leaves a row that
// says so. It stores what is known at the start: ID, Start (now when zero),
// Policy, the three hashes, Code, Labels, NsboxVersion and Supervisor (this
// process when nil, so that Reap can tell when it is gone); Finish writes
// every field again.
func (db *DB) Begin(r *Run) error {
	if err := db.begin(r); err != nil {
		return fmt.Errorf("audit begin run %s in %s: %w", r.ID, db.path, err)
	}
	return nil
}

func (db *DB) begin(r *Run) error {
	if r.ID == "" {
		return errors.New("empty run id")
	}
	if err := checkLabels(r.Labels); err != nil {
		return err
	}
	if r.Start.IsZero() {
		r.Start = time.Now()
	}
	r.Status = StatusUnfinished
	if r.Supervisor == nil {
		r.Supervisor = thisHost().self
	}
	machine, boot, pid, start, ns := supervisorColumns(r.Supervisor)
	ctx := context.Background()
	// The row and its labels in one transaction: a row never lacks the
	// labels it is listed by. chain_version 0: not hashed yet.
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs
			(id, start_ns, policy, policy_sha256, root_manifest_sha256, code_sha256, code, status, nsbox_version,
			 chain_version, supervisor_machine_id, supervisor_boot_id, supervisor_pid, supervisor_start_ticks,
			 supervisor_ns, stdin_sha256, stdin_bytes)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Start.UnixNano(), r.Policy, r.PolicySHA256, r.RootManifestSHA256, r.CodeSHA256,
			r.Code, r.Status, r.NsboxVersion, machine, boot, pid, start, ns, r.StdinSHA256, r.StdinBytes)
		if err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		return insertLabels(ctx, tx, r)
	})
}

// Finish records how run r ended and links the row into the hash chain: it
// gets the next seq and the previous finished row's hash, and r.Seq,
// r.PrevHash, r.Hash and r.ChainVersion are set on success. A run never
// begun is inserted whole, so a failed Begin does not lose the run; a nil
// r.Supervisor is this process. r.Status must be a final status; a zero
// r.End is set to now; heads are cut to HeadBytes, the reason to
// MaxReasonBytes of valid UTF-8, r.Network as clipNetwork says (a copy:
// the result it came from is not changed).
func (db *DB) Finish(r *Run) error {
	if err := db.finish(r); err != nil {
		return fmt.Errorf("audit finish run %s in %s: %w", r.ID, db.path, err)
	}
	return nil
}

func (db *DB) finish(r *Run) error {
	switch {
	case r.ID == "":
		return errors.New("empty run id")
	case r.Status == "" || r.Status == StatusUnfinished:
		return fmt.Errorf("status %q is not a final status", r.Status)
	}
	if err := checkLabels(r.Labels); err != nil {
		return err
	}
	if r.Start.IsZero() {
		return errors.New("zero start time")
	}
	if r.End.IsZero() {
		r.End = time.Now()
	}
	if r.Supervisor == nil {
		r.Supervisor = thisHost().self
	}
	if err := clipNetwork(r); err != nil {
		return err
	}
	clipHeads(r)
	clipReason(r)
	ctx := context.Background()
	var linked Run
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		linked = *r
		if err := link(ctx, tx, &linked); err != nil {
			return err
		}
		if err := insertLabels(ctx, tx, &linked); err != nil {
			return err
		}
		if err := insertViolations(ctx, tx, &linked); err != nil {
			return err
		}
		return insertConnections(ctx, tx, &linked)
	})
	if err != nil {
		return err
	}
	r.Seq, r.PrevHash, r.Hash, r.ChainVersion = linked.Seq, linked.PrevHash, linked.Hash, linked.ChainVersion
	return nil
}

// link gives r the next place in the chain and writes the row's fields (not
// its labels, violations and connections). It runs inside a BEGIN IMMEDIATE transaction
// (writeTx), which holds the write lock from the read of the chain's head
// to the commit, so no other finisher can take the same seq: the chain
// stays linear however many processes finish at once.
func link(ctx context.Context, tx *sql.Tx, r *Run) error {
	var err error
	if r.Seq, r.PrevHash, err = chainHead(ctx, tx); err != nil {
		return err
	}
	r.Seq++
	r.ChainVersion = chainVersion
	r.Hash = rowHash(r)
	return upsertFinished(ctx, tx, r)
}

// supervisorColumns is how a Supervisor is stored: five values, or five
// NULLs for none.
func supervisorColumns(s *Supervisor) (machine, boot, pid, start, ns any) {
	if s == nil {
		return nil, nil, nil, nil, nil
	}
	return s.MachineID, s.BootID, s.PID, s.StartTicks, s.Namespaces
}

// networkColumns is how a Network's totals are stored on runs: an empty
// mode and proxy and zeros for none.
func networkColumns(n *result.Network) (mode, proxy string, dropped, refused int, sent, received int64) {
	if n == nil {
		return "", "", 0, 0, 0, 0
	}
	return n.Mode, n.Proxy, n.ConnectionsDropped, n.Refused, n.BytesSent, n.BytesReceived
}

// genesisHash is the prev_hash of the first finished row.
const genesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// chainHead returns the seq and hash of the last finished row, or 0 and
// genesisHash when none is. A head edited into nonsense (a text seq, a NULL
// hash) does not stop the log: the next row links to what is there, and
// Verify reports the edited row.
func chainHead(ctx context.Context, q querier) (seq int64, hash string, err error) {
	var h sql.NullString
	err = q.QueryRowContext(ctx, `SELECT seq, hash FROM runs
		WHERE seq IS NOT NULL AND typeof(seq) = 'integer' ORDER BY seq DESC LIMIT 1`).Scan(&seq, &h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, genesisHash, nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read the head of the chain: %w", err)
	}
	return seq, h.String, nil
}

// upsertFinished writes every field of r. The update applies only to a row
// not yet in the chain, so finishing twice changes nothing and fails.
func upsertFinished(ctx context.Context, tx *sql.Tx, r *Run) error {
	machine, boot, pid, start, ns := supervisorColumns(r.Supervisor)
	mode, proxy, dropped, refused, sent, received := networkColumns(r.Network)
	res, err := tx.ExecContext(ctx, `INSERT INTO runs (
			id, seq, start_ns, end_ns, duration_ms, policy, policy_sha256, root_manifest_sha256,
			code_sha256, code, status, exit_code, signal, cpu_ms, peak_memory_bytes,
			stdout_bytes, stderr_bytes, stdout_head, stderr_head, stdout_truncated, stderr_truncated,
			nsbox_version, prev_hash, hash, chain_version, reason,
			supervisor_machine_id, supervisor_boot_id, supervisor_pid, supervisor_start_ticks, supervisor_ns,
			network, net_proxy, net_connections_dropped, net_refused, net_bytes_sent, net_bytes_received,
			stdin_sha256, stdin_bytes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
			?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			seq = excluded.seq, start_ns = excluded.start_ns, end_ns = excluded.end_ns,
			duration_ms = excluded.duration_ms, policy = excluded.policy,
			policy_sha256 = excluded.policy_sha256, root_manifest_sha256 = excluded.root_manifest_sha256,
			code_sha256 = excluded.code_sha256, code = excluded.code, status = excluded.status,
			exit_code = excluded.exit_code, signal = excluded.signal, cpu_ms = excluded.cpu_ms,
			peak_memory_bytes = excluded.peak_memory_bytes, stdout_bytes = excluded.stdout_bytes,
			stderr_bytes = excluded.stderr_bytes, stdout_head = excluded.stdout_head,
			stderr_head = excluded.stderr_head, stdout_truncated = excluded.stdout_truncated,
			stderr_truncated = excluded.stderr_truncated, nsbox_version = excluded.nsbox_version,
			prev_hash = excluded.prev_hash, hash = excluded.hash,
			chain_version = excluded.chain_version, reason = excluded.reason,
			supervisor_machine_id = excluded.supervisor_machine_id, supervisor_boot_id = excluded.supervisor_boot_id, supervisor_pid = excluded.supervisor_pid,
			supervisor_start_ticks = excluded.supervisor_start_ticks, supervisor_ns = excluded.supervisor_ns,
			network = excluded.network, net_proxy = excluded.net_proxy,
			net_connections_dropped = excluded.net_connections_dropped, net_refused = excluded.net_refused,
			net_bytes_sent = excluded.net_bytes_sent, net_bytes_received = excluded.net_bytes_received,
			stdin_sha256 = excluded.stdin_sha256, stdin_bytes = excluded.stdin_bytes
		WHERE runs.seq IS NULL`,
		r.ID, r.Seq, r.Start.UnixNano(), r.End.UnixNano(), r.DurationMS, r.Policy, r.PolicySHA256,
		r.RootManifestSHA256, r.CodeSHA256, r.Code, r.Status, r.ExitCode, r.Signal, r.CPUMS,
		r.PeakMemoryBytes, r.StdoutBytes, r.StderrBytes, nonNil(r.StdoutHead), nonNil(r.StderrHead),
		boolInt(r.StdoutTruncated), boolInt(r.StderrTruncated), r.NsboxVersion, r.PrevHash, r.Hash,
		r.ChainVersion, r.Reason, machine, boot, pid, start, ns,
		mode, proxy, dropped, refused, sent, received, r.StdinSHA256, r.StdinBytes)
	if err != nil {
		return fmt.Errorf("write run: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("write run: %w", err)
	} else if n == 0 {
		return ErrFinished
	}
	return nil
}

// insertLabels replaces the run's labels with r.Labels.
func insertLabels(ctx context.Context, tx *sql.Tx, r *Run) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_labels WHERE run_id = ?`, r.ID); err != nil {
		return fmt.Errorf("clear labels: %w", err)
	}
	for k, v := range r.Labels {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_labels (run_id, key, value) VALUES (?, ?, ?)`,
			r.ID, k, v); err != nil {
			return fmt.Errorf("insert label %q: %w", k, err)
		}
	}
	return nil
}

// insertViolations replaces the run's violations with r.Violations, keeping
// their order in idx.
func insertViolations(ctx context.Context, tx *sql.Tx, r *Run) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_violations WHERE run_id = ?`, r.ID); err != nil {
		return fmt.Errorf("clear violations: %w", err)
	}
	for i, v := range r.Violations {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_violations
			(run_id, idx, kind, name, line, col, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, i, v.Kind, v.Name, v.Line, v.Col, v.Detail); err != nil {
			return fmt.Errorf("insert violation %d: %w", i, err)
		}
	}
	return nil
}

// insertConnections replaces the run's connections with those of
// r.Network, keeping their order in idx.
func insertConnections(ctx context.Context, tx *sql.Tx, r *Run) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_connections WHERE run_id = ?`, r.ID); err != nil {
		return fmt.Errorf("clear connections: %w", err)
	}
	if r.Network == nil || len(r.Network.Connections) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO run_connections
		(run_id, idx, host, port, method, address, allowed, reason, bytes_sent, bytes_received, start_ms, duration_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare to insert connections: %w", err)
	}
	defer stmt.Close()
	for i, c := range r.Network.Connections {
		if _, err := stmt.ExecContext(ctx, r.ID, i, c.Host, c.Port, c.Method, c.Address, boolInt(c.Allowed),
			c.Reason, c.BytesSent, c.BytesReceived, c.StartMS, c.DurationMS); err != nil {
			return fmt.Errorf("insert connection %d (host %q port %d): %w", i, c.Host, c.Port, err)
		}
	}
	return nil
}

// nonNil stores an empty head as an empty BLOB: the driver binds a nil
// slice as NULL, which the column refuses.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
