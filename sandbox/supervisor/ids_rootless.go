package supervisor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Ids in nsbox's outer user namespace (rootless mode, internal/userns).
// There the "host" ids of a run are ids of the outer namespace, and only
// the ones it maps exist: with a subordinate range, a run's pair comes
// from it as in root mode (the program's host uid is one of the caller's
// subordinate ids, never the caller's); with the caller's uid mapped
// alone, there is no pair to give, and the run shares the caller's uid
// (sharedIDs).

// runIDsFor returns the run's ids: root mode's pair from r (or the
// environment's range), or in the outer namespace what it maps.
func runIDsFor(r IDRange, runID string) (*runIDs, error) {
	if !userns.Outer() {
		if r == (IDRange{}) {
			var err error
			if r, err = IDRangeFromEnv(); err != nil {
				return nil, err
			}
		}
		return allocIDs(r, IDLockDir, runID)
	}
	first, count, err := userns.MappedIDs()
	if err != nil {
		return nil, err
	}
	if count < IDsPerRun+1 {
		return sharedIDs(), nil
	}
	if r == (IDRange{}) && os.Getenv("NSBOX_ID_RANGE") != "" {
		if r, err = IDRangeFromEnv(); err != nil {
			return nil, err
		}
	}
	if r == (IDRange{}) {
		r = EvenRange(first, count)
	}
	if err := r.checkMapped(first, count); err != nil {
		return nil, err
	}
	return allocSlot(r, filepath.Join(userns.RuntimeDir(), "ids"), runID)
}

// sharedIDs are the ids of a run in an outer namespace that maps the
// caller alone: the program runs as the caller's uid, mapped to
// spec.SandboxID in the run's namespace, and the init owns it as the
// caller too. No lock: nothing else can take the caller's uid.
func sharedIDs() *runIDs {
	return &runIDs{Root: 0, Sandbox: 0, shared: true}
}

// EvenRange is the largest range inside [first, first+count) that starts
// and ends on a slot boundary: in nsbox's user namespace, the ids runs
// take their pairs from.
func EvenRange(first, count uint32) IDRange {
	base := first + first%IDsPerRun
	n := count - (base - first)
	return IDRange{Base: base, Count: n - n%IDsPerRun}
}

// checkMapped refuses a range the outer namespace does not map, or that
// holds its id 0 (nsbox itself).
func (r IDRange) checkMapped(first, count uint32) error {
	if r.Count < IDsPerRun || r.Count%IDsPerRun != 0 || r.Base%IDsPerRun != 0 {
		return fmt.Errorf("id range %s: BASE and COUNT must be even and COUNT at least %d (a run takes %d ids)", r, IDsPerRun, IDsPerRun)
	}
	lo, hi := uint64(first), uint64(first)+uint64(count)
	if uint64(r.Base) < lo || uint64(r.Base)+uint64(r.Count) > hi {
		return fmt.Errorf("id range %s: nsbox's user namespace maps only ids %d-%d (the caller's subordinate ids)", r, lo, hi-1)
	}
	return nil
}

// idMapShared is a shared run's map: the caller, as the program's uid.
func (ids *runIDs) idMapShared() []idMapEntry {
	return []idMapEntry{{Inside: spec.SandboxID, Host: ids.Sandbox}}
}

// allCaps lists every capability this kernel knows, for the init of a
// shared run to keep as ambient ones (spawn.go).
func allCaps() ([]uintptr, error) {
	const p = "/proc/sys/kernel/cap_last_cap"
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	var last int
	if _, err := fmt.Sscan(string(b), &last); err != nil || last < 0 || last > 63 {
		return nil, fmt.Errorf("read %s: unexpected value %q", p, b)
	}
	caps := make([]uintptr, 0, last+1)
	for c := 0; c <= last; c++ {
		caps = append(caps, uintptr(c))
	}
	return caps, nil
}
