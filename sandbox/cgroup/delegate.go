package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/userns"
)

// LeafName is the cgroup, directly below the delegated subtree, that
// nsbox's own processes move into. Every nsbox process of the subtree
// shares it; it stays, empty, when they are gone, and goes with the
// subtree (systemd removes a scope's cgroup, children and all, when the
// scope ends).
const LeafName = "nsbox-supervisor"

// Delegation is what rootless mode found about the cgroup v2 subtree
// delegated to this process's user.
type Delegation struct {
	// Path is the subtree's directory: this process's cgroup, or the
	// parent of LeafName once nsbox moved itself there; "" on cgroup v1.
	Path string
	// Usable says runs can be created below Path: it is writable, offers
	// memory, pids and cpu, and holds no process other than this one.
	Usable bool
	// Why says what is wrong when !Usable; Info.Hint has the fix.
	Why string
}

// Fixes in rootless mode.
const (
	rootlessFix = "`systemd-run --user --scope -p Delegate=yes nsbox run ...` (the same arguments; it needs the " +
		"user's systemd instance: a login session, or `loginctl enable-linger USER`)"
	hintRootlessV1 = "run nsbox as root, or on a cgroup v2 host (systemd.unified_cgroup_hierarchy=1) in a scope " +
		"delegated to you: " + rootlessFix
	hintRootlessNotDelegated = "start nsbox in a cgroup that systemd delegates to you: " + rootlessFix +
		"; or run nsbox as root"
	hintRootlessControllers = "have systemd delegate them to user sessions (as root: `mkdir -p " +
		"/etc/systemd/system/user@.service.d && printf '[Service]\\nDelegate=cpu memory pids\\n' > " +
		"/etc/systemd/system/user@.service.d/delegate.conf && systemctl daemon-reload`, then log in again); " +
		"or run nsbox as root"
	hintRootlessBusy = "start nsbox in a scope of its own, where it is the only process: " + rootlessFix
)

// whyRootlessV1 is Delegation.Why on a cgroup v1 or hybrid host.
const whyRootlessV1 = "cgroup v1 (or a hybrid of v1 and v2) cannot be delegated to an unprivileged user"

// PrepareDelegated readies the delegated subtree for runs: in rootless mode
// it moves this process (all its threads) into <subtree>/LeafName and
// enables memory, pids and cpu in the subtree's cgroup.subtree_control.
// Call it once, early, in the process that is alone in the subtree and
// before it starts the processes that will create runs: they are born in
// the leaf, and the subtree is free of processes. As root, and when there
// is no usable subtree (Detect says why), it does nothing; it fails only
// when a step it tried failed. New does the same for its own process, so
// a process that creates runs itself needs no call.
func PrepareDelegated() error {
	if !userns.Rootless() {
		return nil
	}
	h, err := detectHost()
	if err != nil {
		return err
	}
	if !h.rootless || h.version != 2 {
		return nil
	}
	info, err := h.info()
	if err != nil {
		return err
	}
	if !info.Delegation.Usable {
		return nil
	}
	return h.enterDelegated()
}

// readSelfCgroup returns this process's cgroup v2 path ("/user.slice/...")
// from /proc/self/cgroup, relative to the v2 root as mounted.
func readSelfCgroup() (string, error) {
	const file = "/proc/self/cgroup"
	m, err := cgroups.ParseCgroupFile(file)
	if err != nil {
		return "", fmt.Errorf("cgroup: read %s: %w", file, err)
	}
	p, ok := m[""]
	if !ok {
		return "", fmt.Errorf("cgroup: %s has no cgroup v2 line (0::/...)", file)
	}
	// A cgroup outside this process's cgroup namespace shows as
	// "/../..": it is not below the mounted root.
	if !path.IsAbs(p) || path.Clean(p) != p || strings.Contains(p, "/..") {
		return "", fmt.Errorf("cgroup: %s: this process's cgroup %q is outside the mounted cgroup tree", file, p)
	}
	return p, nil
}

// accessWrite is host.writable on a real host: access(2) with W_OK, the
// kernel's own permission check. Not the effective uid: inside nsbox's
// outer user namespace the process is uid 0 there, yet a file owned by
// host root (shown as the overflow uid) stays read-only to it, since
// capabilities in a user namespace do not reach owners outside it.
func accessWrite(p string) error {
	if err := unix.Access(p, unix.W_OK); err != nil {
		return &os.PathError{Op: "access", Path: p, Err: err}
	}
	return nil
}

// delegatedPath is the subtree rootless runs are created below: this
// process's cgroup, or its parent when this process already is in
// LeafName.
func (h *host) delegatedPath() string {
	p := filepath.Join(h.v2root, h.self)
	if filepath.Base(p) == LeafName {
		return filepath.Dir(p)
	}
	return p
}

// base is the directory run cgroups are created below on v2: the root as
// root, the delegated subtree in rootless mode.
func (h *host) base() string {
	if h.rootless {
		return h.delegatedPath()
	}
	return h.v2root
}

// infoRootless is info in rootless mode: what the delegated subtree
// allows. It changes nothing.
func (h *host) infoRootless() (Info, error) {
	d := &Delegation{}
	info := Info{Version: h.version, Controllers: make(map[string]string), Delegation: d}
	if h.version != 2 {
		info.Missing = slices.Clone(neededV1)
		d.Why, info.Hint = whyRootlessV1, hintRootlessV1
		return info, nil
	}
	dir := h.delegatedPath()
	d.Path = dir
	var whys, hints []string
	refuse := func(why, hint string, ctrls ...string) {
		whys = append(whys, why)
		if !slices.Contains(hints, hint) {
			hints = append(hints, hint)
		}
		for _, c := range ctrls {
			if !slices.Contains(info.Missing, c) {
				info.Missing = append(info.Missing, c)
			}
		}
	}

	// Writable: the directory (to create the leaf and the runs' parent),
	// cgroup.procs (to move processes below it) and
	// cgroup.subtree_control (to enable the controllers).
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if err := h.writable(p); err != nil {
			if errors.Is(err, unix.EROFS) {
				refuse(fmt.Sprintf("%s is on a read-only mount", p), hintReadOnly, neededV2...)
			} else {
				refuse(fmt.Sprintf("%s, the cgroup this process runs in, is not delegated to its user: %v", dir, err),
					hintRootlessNotDelegated, neededV2...)
			}
			break
		}
	}
	if len(info.Missing) == 0 {
		avail, err := readWords(dir, "cgroup.controllers")
		if err != nil {
			return Info{}, err
		}
		enabled, err := readWords(dir, "cgroup.subtree_control")
		if err != nil {
			return Info{}, err
		}
		var absent, off []string
		for _, ctrl := range neededV2 {
			switch {
			case !avail[ctrl]:
				absent = append(absent, ctrl)
			case !enabled[ctrl]:
				off = append(off, ctrl)
			}
		}
		if len(absent) > 0 {
			refuse(fmt.Sprintf("controllers %s are not delegated to %s (its cgroup.controllers lists %q)",
				strings.Join(absent, ", "), dir, strings.Join(slices.Sorted(maps.Keys(avail)), " ")),
				hintRootlessControllers, absent...)
		}
		if len(off) > 0 {
			others, err := h.otherProcesses(dir)
			if err != nil {
				return Info{}, err
			}
			if len(others) > 0 {
				refuse(fmt.Sprintf("%s holds processes other than this one (pids %v), and cgroup v2 enables controllers "+
					"for a cgroup's children only while it holds none (the \"no internal processes\" rule)", dir, others),
					hintRootlessBusy, off...)
			}
		}
	}
	d.Usable = len(info.Missing) == 0
	d.Why = strings.Join(whys, "; ")
	if d.Usable {
		for _, ctrl := range neededV2 {
			info.Controllers[ctrl] = dir
		}
	}

	hints, err := h.socketsV2(&info, hints)
	if err != nil {
		return Info{}, err
	}
	info.Hint = strings.Join(hints, "; ")
	return info, nil
}

// otherProcesses lists the processes in dir's cgroup.procs other than this
// one.
func (h *host) otherProcesses(dir string) ([]int, error) {
	pids, err := cgroups.GetPids(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup: read %s: %w", filepath.Join(dir, "cgroup.procs"), err)
	}
	return slices.DeleteFunc(pids, func(pid int) bool { return pid == h.pid }), nil
}

// busyTimeout bounds how long enterDelegated waits for a subtree to empty:
// other nsbox processes started in it at the same moment may still be
// moving into the leaf.
const busyTimeout = time.Second

// enterDelegated moves this process into <subtree>/LeafName, unless it is
// there already, and enables the needed controllers in the subtree's
// cgroup.subtree_control. Call it only when the delegation is usable.
func (h *host) enterDelegated() error {
	dir := h.delegatedPath()
	if filepath.Join(h.v2root, h.self) == dir {
		leaf := filepath.Join(dir, LeafName)
		if err := os.Mkdir(leaf, 0o755); err == nil {
			if err := h.populated(leaf); err != nil {
				return err
			}
		} else if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup: create %s: %w", leaf, err)
		}
		if err := cgroups.WriteCgroupProc(leaf, h.pid); err != nil {
			return fmt.Errorf("cgroup: move this process (pid %d) into %s: %w", h.pid, leaf, err)
		}
		h.self = path.Join(h.self, LeafName)
	}
	deadline := time.Now().Add(busyTimeout)
	for {
		err := enableControllers(dir)
		if err == nil || !errors.Is(err, unix.EBUSY) {
			return err
		}
		if time.Now().After(deadline) {
			others, lerr := h.otherProcesses(dir)
			if lerr != nil {
				return errors.Join(err, lerr)
			}
			return fmt.Errorf("cgroup: enable the controllers in %s: %w: it still holds processes other than "+
				"nsbox's (pids %v) after %s (%v); %s", dir, ErrUnavailable, others, busyTimeout, err, hintRootlessBusy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
