package audit

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/nsbox/nsbox/internal/filekind"
)

// busyTimeout is how long SQLite itself waits for a lock before reporting
// the database busy; writeTx then retries until writeDeadline.
const (
	busyTimeout   = 5 * time.Second
	writeDeadline = 30 * time.Second
)

// DB is an open audit database. It is safe for concurrent use.
type DB struct {
	path string
	sql  *sql.DB
}

// Open opens the audit database at path, creating it (and its directory)
// when missing and migrating an older schema. It refuses a database whose
// schema is newer than this package's.
func Open(path string) (*DB, error) {
	db, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit db %s: %w", path, err)
	}
	return db, nil
}

func open(path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("empty path")
	}
	// Absolute and clean, so the file: URI has no authority part ("//x")
	// and means the same file whatever the working directory.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// 0700: the database holds programs and their output. Only directories
	// created here get it; an existing one is left as its owner set it.
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, err
	}
	// A missing database is built elsewhere and linked into place, so no
	// process ever opens one without its schema or WAL mode.
	fi, err := os.Stat(abs) // a symlink to the log is fine; to a device, not
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := create(abs); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		// SQLite would open a device or FIFO and create its journal,
		// mode 0666, beside it (/dev/null-journal).
		return nil, fmt.Errorf("not a regular file (%s): the audit log must be a file or absent", filekind.Of(fi.Mode()))
	}
	db, err := connect(abs)
	if err != nil {
		return nil, err
	}
	// The common case is one cheap read: the schema is current.
	ctx := context.Background()
	v, err := schemaVersion(ctx, db.sql)
	if err == nil && v != SchemaVersion {
		err = db.upgrade(ctx, v)
	}
	if err != nil {
		db.sql.Close()
		return nil, err
	}
	return db, nil
}

// connect opens a connection pool on an existing file. Every connection
// waits busyTimeout for locks and starts its write transactions with
// BEGIN IMMEDIATE, which takes the write lock up front: a deferred
// transaction that reads and then writes can fail with SQLITE_BUSY without
// waiting when another writer committed in between.
func connect(abs string) (*DB, error) {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	q.Set("_synchronous", "NORMAL") // package doc: durability in WAL mode
	q.Set("_stmt_cache_size", "32") // Begin and Finish reuse a dozen statements
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	sdb, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	return &DB{path: abs, sql: sdb}, nil
}

// create builds a new database at path: a temporary file in the same
// directory gets mode 0600, WAL mode and the schema, then is hard-linked to
// path. link(2) fails rather than replace, so when concurrent processes race
// to create the database one wins and the others use its file.
func create(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	tmpPath := tmp.Name()
	defer func() {
		// Nothing of the build is left, whether it was linked or not.
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmpPath + suffix)
		}
	}()
	// CreateTemp makes the file 0600 (less the umask); SQLite gives the
	// -wal and -shm files the database's mode.
	if err := tmp.Close(); err != nil {
		return err
	}
	db, err := connect(tmpPath)
	if err != nil {
		return err
	}
	ctx := context.Background()
	// WAL is persistent in the file header: set once here, never per open.
	if _, err := db.sql.ExecContext(ctx, `PRAGMA journal_mode = WAL`); err != nil {
		db.sql.Close()
		return fmt.Errorf("set WAL mode on %s: %w", tmpPath, err)
	}
	if err := db.migrate(ctx); err != nil {
		db.sql.Close()
		return fmt.Errorf("create schema in %s: %w", tmpPath, err)
	}
	// Closing the last connection checkpoints and removes the -wal and -shm
	// files, so the linked file is complete on its own.
	if err := db.sql.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmpPath, err)
	}
	if err := os.Link(tmpPath, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("link %s to %s: %w", tmpPath, path, err)
	}
	return nil
}

// upgrade migrates a database found at version v: an empty file someone
// created by hand (v 0) or an older schema.
func (db *DB) upgrade(ctx context.Context, v int) error {
	if v > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this nsbox's %d", v, SchemaVersion)
	}
	if v == 0 {
		// An --audit-db pointed at some other SQLite database must not
		// get our tables and WAL mode.
		var tables int
		if err := db.sql.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		if tables > 0 {
			return errors.New("not an nsbox audit database: it has tables but no schema_version")
		}
		// journal_mode cannot change inside a transaction; it is a no-op
		// when already WAL.
		err := retryBusy(ctx, func() error {
			_, err := db.sql.ExecContext(ctx, `PRAGMA journal_mode = WAL`)
			return err
		})
		if err != nil {
			return fmt.Errorf("set WAL mode: %w", err)
		}
	}
	return db.migrate(ctx)
}

// Close closes the database.
func (db *DB) Close() error {
	if err := db.sql.Close(); err != nil {
		return fmt.Errorf("close audit db %s: %w", db.path, err)
	}
	return nil
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// writeTx runs fn in a BEGIN IMMEDIATE transaction and commits it, retrying
// the whole transaction while SQLite reports the database busy or locked
// (its busy handler is not called in every case, such as WAL recovery).
// fn must be safe to run again: it may not keep state across attempts.
func (db *DB) writeTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return retryBusy(ctx, func() error { return oneTx(ctx, db.sql.BeginTx, fn) })
}

// oneTx runs fn in one transaction from begin (a pool's or a connection's
// BeginTx) and commits it; on fn's error it rolls back.
func oneTx(ctx context.Context, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error), fn func(*sql.Tx) error) error {
	tx, err := begin(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// writeTxWait is writeTx on one connection whose busy timeout is wait
// rather than busyTimeout, so that a caller that gives up early (Reap, with
// a deadline in ctx) is not held in SQLite's own wait: cancelling ctx
// interrupts a running statement, not the busy handler's sleep.
func (db *DB) writeTxWait(ctx context.Context, wait time.Duration, fn func(*sql.Tx) error) (err error) {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, wait.Milliseconds())); err != nil {
		return fmt.Errorf("set busy timeout: %w", err)
	}
	defer func() {
		// The connection goes back to the pool with the usual timeout, or
		// not at all.
		_, rerr := conn.ExecContext(context.Background(), fmt.Sprintf(`PRAGMA busy_timeout = %d`, busyTimeout.Milliseconds()))
		if rerr != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return retryBusy(ctx, func() error { return oneTx(ctx, conn.BeginTx, fn) })
}

// retryBusy runs fn until it succeeds, fails with anything but busy, or
// writeDeadline passes; waits grow from 1ms to 100ms, jittered so that
// processes that collided do not collide again.
func retryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(writeDeadline)
	wait := time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's "database is busy" or "locked".
func isBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// readTx runs fn on one connection inside a deferred (read) transaction, so
// that several queries see one snapshot: in WAL mode readers do not block
// the writers, and writers do not change what a reader sees.
func (db *DB) readTx(ctx context.Context, fn func(querier) error) (err error) {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The pool's BeginTx would be BEGIN IMMEDIATE (_txlock) and take the
	// write lock; a read needs none.
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() {
		if _, rerr := conn.ExecContext(ctx, `ROLLBACK`); rerr != nil {
			// A connection left inside a transaction must not go back
			// to the pool.
			conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("end read: %w", rerr))
		}
	}()
	return fn(conn)
}
