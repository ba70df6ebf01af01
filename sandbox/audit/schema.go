package audit

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SchemaVersion is the schema this package reads and writes.
const SchemaVersion = 4

// migrations[i] brings a database from version i to i+1. A new version
// appends a step; a step never changes once released, since databases in the
// field were built by it.
var migrations = []string{
	// 0 -> 1: the runs, their labels and violations.
	`
CREATE TABLE runs (
	id                   TEXT PRIMARY KEY,
	seq                  INTEGER UNIQUE,          -- position in the chain; NULL until Finish
	start_ns             INTEGER NOT NULL,        -- Unix nanoseconds
	end_ns               INTEGER,                 -- NULL until Finish
	duration_ms          INTEGER NOT NULL DEFAULT 0,
	status               TEXT NOT NULL,           -- 'unfinished' until Finish
	policy               TEXT NOT NULL,
	policy_sha256        TEXT NOT NULL,
	root_manifest_sha256 TEXT NOT NULL,
	code_sha256          TEXT NOT NULL,
	exit_code            INTEGER,
	signal               INTEGER,
	cpu_ms               INTEGER,
	peak_memory_bytes    INTEGER,
	stdout_bytes         INTEGER NOT NULL DEFAULT 0,
	stderr_bytes         INTEGER NOT NULL DEFAULT 0,
	stdout_truncated     INTEGER NOT NULL DEFAULT 0,
	stderr_truncated     INTEGER NOT NULL DEFAULT 0,
	nsbox_version        TEXT NOT NULL,
	prev_hash            TEXT,                    -- NULL until Finish
	hash                 TEXT,                    -- NULL until Finish
	-- The large values last: SQLite walks a row's overflow pages to reach
	-- the columns after one, so queries of the small columns stay cheap.
	stdout_head          BLOB NOT NULL DEFAULT x'',
	stderr_head          BLOB NOT NULL DEFAULT x'',
	code                 TEXT                     -- NULL unless the policy stores code
);
CREATE INDEX runs_start ON runs (start_ns);
CREATE INDEX runs_status ON runs (status);

CREATE TABLE run_labels (
	run_id TEXT NOT NULL,                         -- runs.id
	key    TEXT NOT NULL,
	value  TEXT NOT NULL,
	PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE INDEX run_labels_key ON run_labels (key, value);

CREATE TABLE run_violations (
	run_id TEXT NOT NULL,                         -- runs.id
	idx    INTEGER NOT NULL,                      -- order in the result, from 0
	kind   TEXT NOT NULL,
	name   TEXT NOT NULL,
	line   INTEGER NOT NULL,
	col    INTEGER NOT NULL,
	detail TEXT NOT NULL,
	PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE INDEX run_violations_name ON run_violations (kind, name);
`,
	// 1 -> 2: why a run ended (reason), which process began its row (the
	// supervisor_ columns, so that a later process can tell a dead
	// supervisor's row from a running one), and which chain encoding a
	// finished row's hash uses. ADD COLUMN leaves the existing rows as they
	// are (no rewrite of a large log under the write lock): they read as
	// chain_version 1, reason '' and no supervisor, as they were hashed.
	// The new columns come after the large ones; only the reaper's query of
	// the few unfinished rows reads them without the rest.
	`
ALTER TABLE runs ADD COLUMN chain_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN supervisor_machine_id TEXT;     -- NULL: no identity recorded
ALTER TABLE runs ADD COLUMN supervisor_boot_id TEXT;
ALTER TABLE runs ADD COLUMN supervisor_pid INTEGER;
ALTER TABLE runs ADD COLUMN supervisor_start_ticks INTEGER;
ALTER TABLE runs ADD COLUMN supervisor_ns TEXT;
`,
	// 2 -> 3: what a run in network allowlist mode did through the proxy:
	// the totals on runs (network '' for a run without network) and one
	// row per connection listed, in order. As in 1 -> 2, ADD COLUMN
	// rewrites no row: the existing rows read as no network, as they were
	// hashed (encodings 1 and 2 do not cover these columns). The index
	// answers "which runs talked to host X" (hosts compare as DNS names
	// do, ASCII case aside) without reading the runs.
	`
ALTER TABLE runs ADD COLUMN network TEXT NOT NULL DEFAULT '';   -- '' (none) or 'allowlist'
ALTER TABLE runs ADD COLUMN net_proxy TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN net_connections_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN net_refused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN net_bytes_sent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN net_bytes_received INTEGER NOT NULL DEFAULT 0;

CREATE TABLE run_connections (
	run_id         TEXT NOT NULL,                 -- runs.id
	idx            INTEGER NOT NULL,              -- order in the result, from 0
	host           TEXT NOT NULL,
	port           INTEGER NOT NULL,
	method         TEXT NOT NULL,
	address        TEXT NOT NULL,
	allowed        INTEGER NOT NULL,              -- 0 or 1
	reason         TEXT NOT NULL,
	bytes_sent     INTEGER NOT NULL,
	bytes_received INTEGER NOT NULL,
	start_ms       INTEGER NOT NULL,
	duration_ms    INTEGER NOT NULL,
	PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE INDEX run_connections_host ON run_connections (host COLLATE NOCASE, run_id);
`,
	// 3 -> 4: the program's standard input, by digest and length
	// (stdin_sha256 '' for a run given none). As before, the existing
	// rows read as they were hashed: no input (encodings 1 to 3 do not
	// cover these columns).
	`
ALTER TABLE runs ADD COLUMN stdin_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN stdin_bytes INTEGER NOT NULL DEFAULT 0;
`,
}

// createVersionTable is outside the numbered steps: it is what the
// numbering is recorded in.
const createVersionTable = `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL                   -- Unix seconds
)`

// querier is what both *sql.Tx and *sql.Conn offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion reads the version of the database q is on; 0 for an empty
// one.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	// The table is looked up first, so an empty database is version 0
	// without matching an error message.
	var n int
	if err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// migrate brings the database to SchemaVersion in one write transaction.
// The version is read again inside it: another process may have migrated
// the database since the caller looked.
func (db *DB) migrate(ctx context.Context) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, createVersionTable); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		v, err := schemaVersion(ctx, tx)
		if err != nil {
			return err
		}
		if v > SchemaVersion {
			return fmt.Errorf("schema version %d is newer than this nsbox's %d", v, SchemaVersion)
		}
		for ; v < SchemaVersion; v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate schema %d -> %d: %w", v, v+1, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`,
				v+1, time.Now().Unix()); err != nil {
				return fmt.Errorf("record schema version %d: %w", v+1, err)
			}
		}
		return nil
	})
}
