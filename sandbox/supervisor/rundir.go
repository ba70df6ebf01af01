package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/userns"
)

// DefaultStateDir holds per-run directories (runs/ID) while runs are live.
// NSBOX_STATE_DIR overrides it; another user than root has its own
// (userns.StateHome).
const DefaultStateDir = "/var/lib/nsbox"

// StateDir returns the state directory from the environment or the default.
func StateDir() string {
	if d := os.Getenv("NSBOX_STATE_DIR"); d != "" {
		return d
	}
	if userns.NotRoot() {
		return userns.StateHome()
	}
	return DefaultStateDir
}

// runsDir holds one directory per live run.
func runsDir(state string) string { return filepath.Join(state, "runs") }

// runDir is the host directory of one live run. It holds a lock file that
// the supervisor keeps flock'ed for the whole run, so a later supervisor
// can tell a crashed run's leftovers (lock free) from a live run's.
type runDir struct {
	path string
	lock *os.File
}

// newRunDir creates STATE/runs/ID, locks it and removes the leftovers of
// runs whose supervisor died.
//
// The directory is built as runs/.new-ID and renamed into place only once
// its lock is held: a concurrent sweep that found runs/ID between its
// creation and its locking would otherwise take the free lock for a crashed
// run's and delete the directory under this run (seen at 32 parallel runs).
func newRunDir(state, id string) (*runDir, error) {
	runs := runsDir(state)
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir %s: %w", runs, err)
	}
	sweepStale(runs)
	tmp, p := filepath.Join(runs, newPrefix+id), filepath.Join(runs, id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("create run dir %s: %w", tmp, err)
	}
	lock, err := os.OpenFile(filepath.Join(tmp, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("create run lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if err := os.Rename(tmp, p); err != nil {
		lock.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("rename run dir %s to %s: %w", tmp, p, err)
	}
	return &runDir{path: p, lock: lock}, nil
}

// newPrefix marks a run directory that is still being set up; sweeps leave
// it alone unless it is old (its supervisor died during setup).
const newPrefix = ".new-"

// remove deletes the run directory and releases the lock. The program
// never sees the directory (its fresh /workspace is a tmpfs of its own,
// freshWorkspace), so it holds nothing but the lock.
func (d *runDir) remove() error {
	err := os.RemoveAll(d.path)
	d.lock.Close()
	if err != nil {
		return fmt.Errorf("remove run dir %s: %w", d.path, err)
	}
	return nil
}

// isOld reports whether a lock-less run dir is older than any run setup.
func isOld(fi os.FileInfo) bool { return time.Since(fi.ModTime()) > time.Minute }

// sweepStale removes run directories whose lock nobody holds: their
// supervisor crashed (a live run keeps its lock until it has cleaned up).
// Errors are ignored: a leftover that cannot be removed now is tried again
// by the next run and does not concern this one.
func sweepStale(runs string) {
	entries, err := os.ReadDir(runs)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(runs, e.Name())
		if strings.HasPrefix(e.Name(), newPrefix) {
			if fi, serr := os.Stat(p); serr == nil && isOld(fi) {
				os.RemoveAll(p)
			}
			continue
		}
		f, err := os.OpenFile(filepath.Join(p, "lock"), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			// Being created right now, or crashed before locking; only the
			// latter is old enough to matter.
			if fi, serr := os.Stat(p); serr == nil && isOld(fi) {
				os.RemoveAll(p)
			}
			continue
		}
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.RemoveAll(p)
		}
		f.Close()
	}
}
