package job

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/sandbox/audit"
)

// AuditLog is an audit log a long-lived door (the service) keeps open for all
// its runs (Request.AuditLog): opening the database costs more than writing a
// row, and a run's answer waits for its row. A command opens the log per
// run instead (Request.AuditDB).
//
// The log is reopened when its path no longer names the file that was
// opened (an operator moved or replaced it): rows always go where the
// path says, as for a run that opens it itself. A database replaced that
// way stays open until Close, as runs in flight may still be writing to
// it.
type AuditLog struct {
	path string
	mu   sync.Mutex
	db   *audit.DB
	id   fileID
	old  []*audit.DB
}

// reapAtOpenDeadline bounds the reaping OpenAuditLog does.
const reapAtOpenDeadline = 10 * time.Second

// fileID names a file whatever its path.
type fileID struct{ dev, ino uint64 }

// OpenAuditLog opens the audit log at path (audit.Path's default when "") and
// finishes the rows of supervisors that died (all of them: a service
// starts rarely, and its runs then do not reap).
func OpenAuditLog(path string) (*AuditLog, error) {
	l := &AuditLog{path: audit.Path(path)}
	db, err := l.current()
	if err != nil {
		return nil, err
	}
	reapOrphans(db, audit.ReapLimits{}, reapAtOpenDeadline)
	return l, nil
}

// current returns the open database, reopened first if the path now names
// another file (or none: it is then created again).
func (l *AuditLog) current() (*audit.DB, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, err := statID(l.path)
	if l.db != nil && err == nil && id == l.id {
		return l.db, nil
	}
	db, err := audit.Open(l.path)
	if err != nil {
		return nil, err
	}
	if id, err = statID(l.path); err != nil {
		db.Close()
		return nil, fmt.Errorf("audit db %s: %w", l.path, err)
	}
	if l.db != nil {
		l.old = append(l.old, l.db)
	}
	l.db, l.id = db, id
	return db, nil
}

func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

// Close closes the log; the runs that used it must be done.
func (l *AuditLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for _, db := range append(l.old, l.db) {
		if db == nil {
			continue
		}
		if err := db.Close(); err != nil && first == nil {
			first = err
		}
	}
	l.db, l.old = nil, nil
	return first
}
