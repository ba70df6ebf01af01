package initproc

import (
	"fmt"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// setRlimits lowers each resource limit to the spec's value and never
// raises one: a limit the supervisor already runs under stays the bound.
func setRlimits(limits []spec.Rlimit) error {
	for _, l := range limits {
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(l.Resource, &cur); err != nil {
			return fmt.Errorf("getrlimit(%d): %w", l.Resource, err)
		}
		want := syscall.Rlimit{Max: min(cur.Max, l.Max)}
		want.Cur = min(want.Max, l.Cur)
		// syscall.Setrlimit, not unix.Setrlimit: for RLIMIT_NOFILE it also
		// drops the limit the Go runtime saved at start-up (Go raises the
		// soft limit for itself and restores the saved one in execve), so
		// the program gets this value and not the saved one.
		if err := syscall.Setrlimit(l.Resource, &want); err != nil {
			return fmt.Errorf("setrlimit(%d, %d/%d): %w", l.Resource, want.Cur, want.Max, err)
		}
		var got syscall.Rlimit
		if err := syscall.Getrlimit(l.Resource, &got); err != nil || got != want {
			return fmt.Errorf("rlimit %d is %d/%d after setrlimit(%d/%d) (%v)", l.Resource, got.Cur, got.Max, want.Cur, want.Max, err)
		}
	}
	return nil
}

// landlockWritableFiles are the device files programs open for writing
// (os.devnull); with spec.WritableDirs they are the only places the
// program may change. Every other path is read-only (and executable where
// the mounts allow it).
var landlockWritableFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// applyLandlock restricts this thread, and so the program it execs, with
// a Landlock ruleset: the filesystem (read-only but for
// spec.WritableDirs) and, with connectPorts, TCP as well: the program may
// connect to those ports only and bind none (network allowlist mode: the
// proxy's port). Scope rights are left to the PID namespace. The ruleset
// uses the newest ABI go-landlock knows, downgraded to what the kernel
// has: network rules need ABI 4, and an older kernel enforces the
// filesystem part alone. It returns the kernel's ABI version, 0 when the
// kernel has no Landlock (the supervisor decides beforehand whether that
// is fatal).
//
// Enforcement is per thread: the init is locked to its OS thread and
// execs from it, so the whole program is covered; the Go runtime's other
// threads vanish at execve. no_new_privs must already be set.
func applyLandlock(connectPorts ...uint16) (int, error) {
	return restrict(spec.WritableDirs, landlockWritableFiles, connectPorts)
}

// restrictPaths enforces a filesystem ruleset on this thread: read and
// execute everywhere, write only in dirs and to files.
func restrictPaths(dirs, files []string) (int, error) {
	return restrict(dirs, files, nil)
}

// restrict enforces restrictPaths' filesystem ruleset and, when
// connectPorts is not nil, a network one: TCP connect to those ports
// only, no TCP bind (and, where the kernel knows them, the same for UDP).
func restrict(dirs, files []string, connectPorts []uint16) (int, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return 0, nil
	}
	args := []any{landlock.V11.HandledAccessFS}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWDirs(dirs...),
		landlock.RWFiles(files...).IgnoreIfMissing(),
	}
	if connectPorts != nil {
		args = append(args, landlock.V11.HandledAccessNet)
		for _, port := range connectPorts {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	cfg := landlock.MustConfig(args...).BestEffort()
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return 0, fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return 0, nil
	}
	defer unix.Close(fd)
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return 0, fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return abi, nil
}
