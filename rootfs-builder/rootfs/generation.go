package rootfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Generations. A root is rebuilt while sandboxes run on it, so a rebuild
// never changes or removes the tree a run uses: each build writes a new
// generation, and the root's path names the current one through a
// symlink. Beside a root built at DIR:
//
//	DIR              symlink to DIR.gen-ID (its base name, so the roots
//	                 directory can move)
//	DIR.gen-ID/      a generation: a complete root, never changed once DIR
//	                 has named it
//	DIR.gen-ID.lock  flock'ed shared by every run of that generation for
//	                 the run's whole life (Hold)
//	DIR.lock         the builder's: one build of DIR at a time
//	DIR.tmp-*        a build in progress, a symlink about to replace DIR,
//	                 a generation being removed
//
// Why not remove the old tree: a run's root is a clone of the
// generation's directory, and its /workspace, /proc, /tmp and /dev are
// mounted on the generation's empty directories. Since Linux 3.18,
// removing a directory that is a mount point in another mount namespace
// detaches the mounts there, so removing the tree would take those from
// every running sandbox, and its files from under its imports. Renaming
// never detaches anything.
//
// The lock sits beside the generation, not inside: a root holds only
// what its manifest lists. A generation without a lock file is one an
// older nsbox built in place at DIR, converted by renaming; runs of that
// nsbox take no lock, so the builder keeps it for LegacyKeep.

// LegacyKeep is how long the builder keeps a generation no run can have
// locked (a root an older nsbox built, renamed aside): longer than the
// longest run (limits.timeout is at most 24 h), with a margin for the
// program's input and the run's setup and teardown.
const LegacyKeep = 25 * time.Hour

const (
	genInfix   = ".gen-"
	lockSuffix = ".lock"
	idTime     = "20060102T150405Z"
)

// NewGenerationID returns the ID of a generation created at t: its UTC
// time, so that a listing sorts by age and LegacyKeep can be applied
// without trusting file times, and a random part.
func NewGenerationID(t time.Time) string {
	var rnd [3]byte
	rand.Read(rnd[:]) // never fails (crypto/rand, Go 1.24+)
	return t.UTC().Format(idTime) + "-" + hex.EncodeToString(rnd[:])
}

// GenerationPath is the path of generation id of the root at dir.
func GenerationPath(dir, id string) string { return dir + genInfix + id }

// GenerationLock is the lock file of the generation at gen.
func GenerationLock(gen string) string { return gen + lockSuffix }

// GenerationOf reports whether name (a base name) is a generation of the
// root whose base name is base, and when it was created.
func GenerationOf(base, name string) (time.Time, bool) {
	id, ok := strings.CutPrefix(name, base+genInfix)
	if !ok {
		return time.Time{}, false
	}
	ts, rnd, ok := strings.Cut(id, "-")
	if !ok || len(rnd) != 6 || strings.Trim(rnd, "0123456789abcdef") != "" {
		return time.Time{}, false
	}
	t, err := time.Parse(idTime, ts)
	return t, err == nil
}

// Resolve returns the directory that holds the root at dir now: the
// generation dir's symlink names, or dir itself when it is a directory (a
// root built by an older nsbox, or one that is not managed in
// generations). Other symlinks on the way are followed. An error means
// dir, or what it names, does not exist.
func Resolve(dir string) (string, error) {
	p := filepath.Clean(dir)
	for range 40 { // the kernel's own bound on symlinks in a path
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if _, ok := GenerationOf(filepath.Base(p), target); ok {
			return filepath.Join(filepath.Dir(p), target), nil
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return "", &os.PathError{Op: "resolve root", Path: dir, Err: syscall.ELOOP}
}

// Held is a generation a caller uses: a builder removes it only after
// Close.
type Held struct {
	// Dir is the generation's directory: use it, never the root's path,
	// which a rebuild may point elsewhere at any moment.
	Dir  string
	lock *os.File // nil for a root without generations
}

// errSwept is a generation removed between Resolve and its lock.
var errSwept = errors.New("generation removed by a rebuild")

// Hold resolves the root at dir to its current generation and holds it:
// a shared flock of its lock file, taken before checking that the
// generation is still there (a rebuild may have switched and removed it
// between the two; then Hold tries once more). A root that is not
// managed in generations (a directory built by an older nsbox) is
// returned without a lock: nothing can be held there.
func Hold(dir string) (*Held, error) {
	h, err := hold(dir)
	if errors.Is(err, errSwept) {
		h, err = hold(dir)
	}
	return h, err
}

func hold(dir string) (*Held, error) {
	gen, err := Resolve(dir)
	if err != nil {
		return nil, fmt.Errorf("rootfs: resolve root: %w", err)
	}
	if !isGeneration(gen) {
		return &Held{Dir: gen}, nil
	}
	f, err := os.Open(GenerationLock(gen))
	if errors.Is(err, fs.ErrNotExist) {
		// No lock: removed with its generation, or a legacy generation,
		// which the builder keeps for LegacyKeep.
		if _, err := os.Lstat(gen); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rootfs: root %s: %w", dir, errSwept)
		}
		return &Held{Dir: gen}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rootfs: hold root %s: %w", dir, err)
	}
	// Shared: any number of runs. A builder takes it exclusively, without
	// waiting, only to rename the generation away and unlink the lock.
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rootfs: hold root %s: flock %s: %w", dir, f.Name(), err)
	}
	// The builder renames a generation away before it unlinks the lock,
	// so a generation still at its name now is held.
	if _, err := os.Lstat(gen); err != nil {
		f.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rootfs: root %s: %w", dir, errSwept)
		}
		return nil, fmt.Errorf("rootfs: hold root %s: %w", dir, err)
	}
	return &Held{Dir: gen, lock: f}, nil
}

// isGeneration reports whether the path gen is named as a generation.
func isGeneration(gen string) bool {
	name := filepath.Base(gen)
	i := strings.LastIndex(name, genInfix)
	if i <= 0 {
		return false
	}
	_, ok := GenerationOf(name[:i], name)
	return ok
}

// Close releases the generation; the next build or sweep may remove it
// if it is no longer current. Closing twice is harmless.
func (h *Held) Close() error {
	if h == nil || h.lock == nil {
		return nil
	}
	err := h.lock.Close()
	h.lock = nil
	if err != nil {
		return fmt.Errorf("rootfs: release root generation %s: %w", h.Dir, err)
	}
	return nil
}
