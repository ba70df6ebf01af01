package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/seccomp"
)

// namespaceNames are the namespaces of cloneFlags, as the result reports
// them.
var namespaceNames = []string{
	result.NamespaceUser, result.NamespaceMount, result.NamespacePID, result.NamespaceNetwork,
	result.NamespaceIPC, result.NamespaceUTS, result.NamespaceCgroup,
}

// confinement is what a run enforces beyond its namespaces and mounts.
type confinement struct {
	cg *cgroup.Cgroup // nil when the run has no cgroup
}

// active describes the protections the run has, for the result.
func (sb *Sandbox) active() *result.Sandbox {
	s := &result.Sandbox{
		Namespaces:  namespaceNames,
		Cgroup:      result.CgroupNone,
		Seccomp:     "none",
		LandlockABI: sb.o.Plan.LandlockABI,
		MemfdNoexec: result.MemfdNoexecNone,
		Rootless:    userns.Outer(),
		HostIDs:     result.HostIDsOwn,
	}
	if sb.ids != nil && sb.ids.shared {
		s.HostIDs = result.HostIDsShared
	}
	if sb.o.Plan.MemfdNoexec != "" {
		s.MemfdNoexec = sb.o.Plan.MemfdNoexec
	}
	if sb.o.Plan.Seccomp != "" {
		s.Seccomp = sb.o.Plan.Seccomp
	}
	if sb.conf.cg != nil {
		s.Cgroup = fmt.Sprintf("v%d", sb.conf.cg.Version())
	}
	return s
}

// loadFilter returns the raw seccomp filter of profile, "" for none: a
// built-in profile's was compiled when nsbox was built; a user's profile
// (an absolute path) is compiled for this machine, through a cache in the
// state directory (see seccomp.LoadFilter).
func loadFilter(profile, stateDir string) ([]byte, error) {
	if profile == "" {
		return nil, nil
	}
	prog, err := seccomp.LoadFilter(profile, filepath.Join(stateDir, "cache", "seccomp"))
	if err != nil {
		return nil, err
	}
	return prog.Raw, nil
}

// newCgroup sweeps the cgroups that supervisors of this state directory
// left when they died mid-run, then creates the run's. In rootless mode
// both happen below the cgroup v2 subtree delegated to the user
// (cgroup.Info.Delegation), which New prepares by moving this process into
// its leaf; a supervisor that shares the subtree with the process that
// started it needs that process to have called cgroup.PrepareDelegated.
func newCgroup(stateDir, id string, l cgroup.Limits) (*cgroup.Cgroup, error) {
	prefix := cgroupPrefix(stateDir)
	cgroup.Sweep(func(name string) bool {
		id, ours := strings.CutPrefix(name, prefix)
		return !ours || runLive(stateDir, id)
	})
	return cgroup.New(prefix+id, l)
}

// cgroupPrefix starts the cgroup names of runs that keep their run
// directories in stateDir: "s" and 8 hex digits of the directory's hash,
// then "-". A supervisor can only tell whether runs of its own state
// directory are live (by their lock), so it sweeps only cgroups with its
// own prefix; runs with another NSBOX_STATE_DIR are left to theirs.
func cgroupPrefix(stateDir string) string {
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(stateDir))
	return "s" + hex.EncodeToString(sum[:4]) + "-"
}

// runLive reports whether the run id still has a supervisor: its run
// directory's lock is held. Used to tell a crashed run's cgroup from a
// running one.
func runLive(stateDir, id string) bool {
	f, err := os.OpenFile(filepath.Join(runsDir(stateDir), id, "lock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// cgroupTasks opens the run cgroup's v1 tasks files (cgroup.OpenTasks)
// for the init, which attaches its own thread with them right after
// reading the spec. There are none on v2, where the init is cloned into
// its cgroup, nor for a run without a cgroup.
//
// The supervisor does not write the init's pid to cgroup.procs: that
// takes a global lock and an RCU grace period while the init starts up,
// where a thread writing "0" to tasks does not. What changes, all before
// the program runs: the init's Go runtime start-up and its other threads
// stay in nsbox's own cgroup until they die at execve; its memory is
// charged to the memcg of its first thread (the mm owner), which may be
// one of them; the run's pids and cpuacct counters start at the attach.
// execve gives the program a new mm owned by the attached thread, so from
// its first instruction everything is charged to the run. Killing a half
// set-up init needs no cgroup: it is PID 1 of its namespace and the
// supervisor's child (stopper.stop signals it first).
func cgroupTasks(cg *cgroup.Cgroup) ([]*os.File, error) {
	if cg == nil {
		return nil, nil
	}
	if _, ok := cg.FD(); ok {
		return nil, nil // v2: CLONE_INTO_CGROUP places it at birth
	}
	return cg.OpenTasks()
}
