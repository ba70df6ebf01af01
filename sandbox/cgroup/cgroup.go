package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"
)

// DefaultParent is the directory, at the root of each hierarchy, that holds
// the cgroups of all runs (and that Sweep cleans).
const DefaultParent = "nsbox"

// ErrUnavailable is wrapped by New when the host cannot enforce a limit
// (see Detect for what is missing and how to fix it).
var ErrUnavailable = errors.New("cgroup controllers unavailable")

// v2Key is the key of the one directory in Paths on v2.
const v2Key = "unified"

// Cgroup is the cgroup of one run, named <parent>/<name>. Its methods may be
// called from several goroutines (e.g. Kill from a timer while the main
// goroutine waits).
type Cgroup struct {
	mu        sync.Mutex
	h         *host
	rel       string            // <parent>/<name>
	paths     map[string]string // v1: hierarchy -> dir; v2: v2Key -> dir
	v1        *fs.Manager       // v1 only
	v2        *fs2.Manager      // v2 only
	dir       string            // v2 only: the cgroup's directory
	fd        int               // v2 only: O_DIRECTORY fd of dir for CLONE_INTO_CGROUP; -1 if none
	destroyed bool
}

// New creates the cgroup <DefaultParent>/<name> and sets the limits. It
// refuses (an error wrapping ErrUnavailable) if a needed controller is
// missing, and (an error naming the path) if the cgroup already exists.
func New(name string, l Limits) (*Cgroup, error) {
	return NewWithParent(DefaultParent, name, l)
}

// NewWithParent is New under another parent (a relative path such as
// "nsbox-test-1234"); tests use it so they never touch real runs.
func NewWithParent(parent, name string, l Limits) (*Cgroup, error) {
	h, err := detectHost()
	if err != nil {
		return nil, err
	}
	return h.create(parent, name, l)
}

func (h *host) create(parent, name string, l Limits) (*Cgroup, error) {
	// Validate everything before the first mkdir, so a bad call leaves
	// nothing behind.
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	// Fail closed: a run whose limits cannot all be enforced is not
	// started at all.
	info, err := h.info()
	if err != nil {
		return nil, err
	}
	rel := parent + "/" + name
	if d := info.Delegation; d != nil && !d.Usable {
		return nil, fmt.Errorf("cgroup: create %s (cgroup v%d, rootless): %w: no usable delegated subtree: %s; %s",
			rel, info.Version, ErrUnavailable, d.Why, info.Hint)
	}
	if len(info.Missing) > 0 {
		return nil, fmt.Errorf("cgroup: create %s (cgroup v%d): %w: %s missing; %s",
			rel, info.Version, ErrUnavailable, strings.Join(info.Missing, ", "), info.Hint)
	}
	if h.rootless {
		// Out of the subtree first, so that it can enable controllers
		// for its children.
		if err := h.enterDelegated(); err != nil {
			return nil, err
		}
	}
	if h.version == 2 {
		return h.createV2(parent, name, l)
	}
	return h.createV1(parent, name, l, info)
}

// mkdirRun creates the run's own directory. It must not exist yet: the
// managers' Apply would silently adopt a leftover cgroup, processes and
// all, of an earlier run with the same name.
func (h *host) mkdirRun(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup: create %s: already exists (a leftover of a crashed run? see Sweep): %w", dir, err)
		}
		return fmt.Errorf("cgroup: create %s: %w", dir, err)
	}
	return h.populated(dir)
}

// populated lets a fake tree add the interface files the kernel would.
func (h *host) populated(dir string) error {
	if h.onMkdir == nil {
		return nil
	}
	return h.onMkdir(dir)
}

// Version is 1 or 2.
func (c *Cgroup) Version() int { return c.h.version }

// FD returns an O_RDONLY|O_DIRECTORY descriptor of the v2 cgroup directory
// for clone3(CLONE_INTO_CGROUP) (Go: SysProcAttr.UseCgroupFD and CgroupFD),
// so the init starts inside the cgroup. ok is false on v1 (and after
// Destroy). The caller must not close it; Destroy does.
func (c *Cgroup) FD() (fd int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd, c.fd >= 0
}

// Add moves process pid, with all its threads (cgroup.procs), into the
// cgroup: on v1 into every hierarchy. Call it while the process is still
// blocked, before it can fork; if it fails, kill it. The supervisor does
// not use it (on v1 the init attaches itself, see OpenTasks): each call
// takes the kernel's global cgroup_threadgroup_rwsem and waits for an RCU
// grace period, milliseconds on a busy host.
func (c *Cgroup) Add(pid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return fmt.Errorf("cgroup: add pid %d to %s: cgroup destroyed", pid, c.rel)
	}
	if pid <= 0 {
		return fmt.Errorf("cgroup: add pid %d to %s: invalid pid", pid, c.rel)
	}
	for _, dir := range c.dirs() {
		if err := cgroups.WriteCgroupProc(dir, pid); err != nil {
			return fmt.Errorf("cgroup: add pid %d to %s: %w", pid, dir, err)
		}
	}
	return nil
}

// Paths returns the cgroup's directories: on v1 by hierarchy ("memory",
// "pids", "cpu", "cpuacct", "freezer"), on v2 one entry, "unified".
func (c *Cgroup) Paths() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.paths)
}

// Destroy kills every process in the cgroup and removes its directories
// (the parent stays: other runs share it). Calling it again after it
// succeeded does nothing; after a failure it tries again.
func (c *Cgroup) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	if err := c.kill(); err != nil {
		return err
	}
	// Nothing may be cloned into the cgroup any more.
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	var errs []error
	for _, dir := range c.dirs() {
		if err := c.h.rmdir(dir); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", dir, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.destroyed = true
	return nil
}

// dirs are the cgroup's distinct directories, sorted (on v1 "cpu" and
// "cpuacct" share one when co-mounted).
func (c *Cgroup) dirs() []string {
	return slices.Compact(slices.Sorted(maps.Values(c.paths)))
}

// where names the cgroup in errors: its directory on v2, and on v1 the
// freezer one (where killing happens) or else any.
func (c *Cgroup) where() string {
	if p, ok := c.paths["freezer"]; ok {
		return p
	}
	if p, ok := c.paths[v2Key]; ok {
		return p
	}
	if d := c.dirs(); len(d) > 0 {
		return d[0]
	}
	return c.rel
}

// open returns the Cgroup of an existing run directory, without touching
// its limits: Sweep uses it to kill and remove a leftover. On v1 it takes
// only the hierarchies where the directory exists (a crash may have left a
// partial one).
func (h *host) open(parent, name string) (*Cgroup, error) {
	c := &Cgroup{h: h, rel: parent + "/" + name, paths: make(map[string]string), fd: -1}
	res := &cgroups.Resources{SkipDevices: true}
	var err error
	if h.version == 2 {
		c.dir = filepath.Join(h.base(), parent, name)
		c.paths[v2Key] = c.dir
		c.v2, err = fs2.NewManager(&cgroups.Cgroup{Resources: res}, c.dir)
	} else {
		for _, ctrl := range v1Hierarchies {
			if mnt, ok := h.v1[ctrl]; ok {
				dir := filepath.Join(mnt, parent, name)
				if _, statErr := os.Stat(dir); statErr == nil {
					c.paths[ctrl] = dir
				}
			}
		}
		c.v1, err = fs.NewManager(&cgroups.Cgroup{Resources: res}, maps.Clone(c.paths))
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup: open %s: %w", c.rel, err)
	}
	return c, nil
}
