package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// A run's host identities. Every concurrent run gets its own pair of host
// ids from a range, one slot of two consecutive ids: the first for the
// init (inside RootID, and the owner of the run's user namespace), the
// second for the program (inside SandboxID). uid and gid are the same
// number. Per-uid kernel state (ucounts: pending signals, inotify,
// POSIX message queues, locked memory, user namespaces, processes; the
// key quota; epoll watches; pipe buffers) is therefore the run's own, and
// what the kernel charges to the owner of a user namespace lands on the
// run's init id rather than on host root (see start).
//
// A slot is held with an flock on a file named after its first id, in a
// directory shared by every nsbox on the host (ids are a host-wide
// resource: two state directories must not hand out the same id). The
// lock lives as long as the supervisor; a released slot has an empty
// file. A file that is free but not empty belongs to a supervisor that
// died before releasing it: the slot is reused only once no process of
// its ids is left.

// IDLockDir holds one lock file per id slot in use or once used.
const IDLockDir = "/run/nsbox/ids"

// IDsPerRun is how many host ids a run takes: the init's and the
// program's.
const IDsPerRun = 2

// IDRange is the host id range the runs take their ids from
// (NSBOX_ID_RANGE=BASE:COUNT).
type IDRange struct {
	Base  uint32 // first host uid/gid
	Count uint32 // how many; a run takes IDsPerRun of them
}

// DefaultIDRange starts where nsbox's ids always were, above systemd's
// container range, and leaves room for 32768 concurrent runs.
var DefaultIDRange = IDRange{Base: 2_000_000_000, Count: 65536}

// Ranges an id range must stay clear of: host root and the system and
// regular accounts (below 65536, which also holds nobody, 65534, and
// systemd's dynamic users), systemd-nspawn's container range, and the
// invalid id (uint32 -1, which setresuid reads as "unchanged").
var reservedIDs = []struct {
	first, last uint64
	what        string
}{
	{0, 65535, "host root and the system and user accounts (0-65535)"},
	{0x80000, 0x6FFFFFFF, "systemd's container range (524288-1879048191)"},
	{1<<32 - 1, 1<<32 - 1, "the invalid id 4294967295"},
}

// ParseIDRange reads BASE:COUNT and refuses a range a run could not use
// safely.
func ParseIDRange(s string) (IDRange, error) {
	b, c, ok := strings.Cut(s, ":")
	base, err1 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	count, err2 := strconv.ParseUint(strings.TrimSpace(c), 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return IDRange{}, fmt.Errorf("id range %q: want BASE:COUNT, two decimal numbers", s)
	}
	r := IDRange{Base: uint32(base), Count: uint32(count)}
	return r, r.Check()
}

// Check refuses an empty or odd range (a run takes a pair of ids at an
// even offset, so that two overlapping ranges still agree on the pairs),
// and one that overlaps reservedIDs.
func (r IDRange) Check() error {
	if r.Count < IDsPerRun || r.Count%IDsPerRun != 0 || r.Base%IDsPerRun != 0 {
		return fmt.Errorf("id range %s: BASE and COUNT must be even and COUNT at least %d (a run takes %d ids)", r, IDsPerRun, IDsPerRun)
	}
	first, last := uint64(r.Base), uint64(r.Base)+uint64(r.Count)-1
	for _, x := range reservedIDs {
		if first <= x.last && x.first <= last {
			return fmt.Errorf("id range %s (%d-%d) overlaps %s", r, first, last, x.what)
		}
	}
	return nil
}

func (r IDRange) String() string { return fmt.Sprintf("%d:%d", r.Base, r.Count) }

// Slots is how many runs the range holds at once.
func (r IDRange) Slots() int { return int(r.Count / IDsPerRun) }

// IDRangeFromEnv returns NSBOX_ID_RANGE, or DefaultIDRange when unset.
func IDRangeFromEnv() (IDRange, error) {
	s := os.Getenv("NSBOX_ID_RANGE")
	if s == "" {
		return DefaultIDRange, nil
	}
	r, err := ParseIDRange(s)
	if err != nil {
		return IDRange{}, fmt.Errorf("NSBOX_ID_RANGE: %w", err)
	}
	return r, nil
}

// runIDs are the host ids of one run, held until release.
type runIDs struct {
	Root    uint32 // the init: inside RootID, the user namespace's owner
	Sandbox uint32 // the program: inside SandboxID
	lock    *os.File
	// shared: nsbox's outer namespace maps the caller alone, and the run
	// has no ids of its own (ids_rootless.go); Root and Sandbox are then
	// both the caller, 0 there.
	shared bool
}

// idMap maps the init (inside RootID) and the program (inside SandboxID)
// to the run's host ids; host root is never mapped, so host files owned
// by root appear as nobody and cannot be written even by the init.
func (ids *runIDs) idMap() []idMapEntry {
	if ids.shared {
		return ids.idMapShared()
	}
	return []idMapEntry{
		{Inside: spec.RootID, Host: ids.Root},
		{Inside: spec.SandboxID, Host: ids.Sandbox},
	}
}

// idMapEntry is one line of a uid_map or gid_map, of size 1.
type idMapEntry struct{ Inside, Host uint32 }

// allocIDs takes the first free slot of r for run id, waiting for
// nothing: a slot locked by a live supervisor is skipped, and so is a
// slot a dead supervisor left while a process of its ids still lives.
func allocIDs(r IDRange, dir, id string) (*runIDs, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	return allocSlot(r, dir, id)
}

// allocSlot is allocIDs over a range already checked.
func allocSlot(r IDRange, dir, id string) (*runIDs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create id lock dir %s: %w", dir, err)
	}
	var busy []uint32 // stale slots with live processes
	for slot := range r.Slots() {
		root := r.Base + uint32(slot)*IDsPerRun
		ids, stale, err := tryIDSlot(dir, root, id)
		switch {
		case err != nil:
			return nil, err
		case ids != nil:
			return ids, nil
		case stale:
			busy = append(busy, root)
		}
	}
	msg := fmt.Sprintf("no free host id slot in NSBOX_ID_RANGE %s: all %d are in use", r, r.Slots())
	if len(busy) > 0 {
		msg += fmt.Sprintf(" (%d of them by processes a crashed nsbox left, first uid %d)", len(busy), busy[0])
	}
	return nil, errors.New(msg)
}

// tryIDSlot locks the slot whose first id is root and returns it, marked
// with the run's id and this process; or nil when another supervisor
// holds it, with stale set when a dead one left it with processes alive.
func tryIDSlot(dir string, root uint32, id string) (ids *runIDs, stale bool, err error) {
	p := filepath.Join(dir, strconv.FormatUint(uint64(root), 10))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("open id lock %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("stat %s: %w", p, err)
	}
	if fi.Size() > 0 {
		// Its last holder died without releasing it. The sandbox dies
		// with its supervisor (PDEATHSIG), but not necessarily before
		// this run would start with the same ids.
		live, err := idsInUse(root, root+1)
		if err != nil {
			f.Close()
			return nil, false, err
		}
		if live {
			f.Close()
			return nil, true, nil
		}
	}
	mark := fmt.Sprintf("run %s\nsupervisor %d\nsince %s\n", id, os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("truncate %s: %w", p, err)
	}
	if _, err := f.WriteAt([]byte(mark), 0); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("write %s: %w", p, err)
	}
	return &runIDs{Root: root, Sandbox: root + 1, lock: f}, false, nil
}

// release marks the slot clean and unlocks it. It runs last of the
// cleanup stack, once the init was reaped (its PID namespace, and every
// process in it, died before the wait returned) and the cgroup is gone:
// no process of the ids is left.
func (ids *runIDs) release() error {
	if ids.lock == nil {
		return nil
	}
	err := ids.lock.Truncate(0)
	ids.lock.Close()
	if err != nil {
		return fmt.Errorf("release id lock %s: %w", ids.lock.Name(), err)
	}
	return nil
}

// idsInUse reports whether any process on the host, zombies included,
// has one of ids as its real, effective, saved or filesystem uid or gid.
func idsInUse(ids ...uint32) (bool, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("read /proc: %w", err)
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[strconv.FormatUint(uint64(id), 10)] = true
	}
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || (f[0] != "Uid:" && f[0] != "Gid:") {
				continue
			}
			for _, v := range f[1:] {
				if want[v] {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
