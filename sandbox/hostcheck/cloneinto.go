package hostcheck

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/cgroup"
)

const cloneIntoName = "clone into cgroup"

// cloneIntoCheck reports CLONE_INTO_CGROUP (clone3, Linux 5.7), which on
// cgroup v2 puts a run's init into its cgroup before it runs a single
// instruction. It is informational: on v1 the supervisor writes the pid
// and only then releases the init, which is as safe.
func cloneIntoCheck(exe string, info cgroup.Info, detectErr error) Check {
	c := Check{Name: cloneIntoName, MinKernel: "5.7"}
	switch d := info.Delegation; {
	case detectErr != nil:
		c.Detail, c.Hint = "not probed: no usable cgroup hierarchy", "see the cgroups check"
	case d != nil && !d.Usable:
		c.Detail, c.Hint = "not probed: rootless, with no usable delegated cgroup v2 subtree", "see the cgroup delegation check"
	case info.Version == 1:
		c.OK, c.Detail = true, "not applicable (cgroup v1: the init attaches itself before any other step)"
	case d != nil:
		return probeCloneInto(exe, d.Path)
	default:
		return probeCloneInto(exe, "")
	}
	return c
}

// probeCloneInto creates a temporary cgroup in dir (the top of the cgroup
// v2 tree when "", where a run's cgroups go: cgroup.DefaultParent is below
// it; in rootless mode the delegated subtree), starts a child straight
// into it (clone3 with CLONE_INTO_CGROUP, as Go does for
// SysProcAttr.UseCgroupFD), checks that the child found itself there, and
// removes the cgroup.
func probeCloneInto(exe, dir string) Check {
	c := Check{Name: cloneIntoName, MinKernel: "5.7"}
	mnt, err := findCgroup2()
	if err != nil {
		c.Detail, c.Hint = err.Error(), "mount cgroup2 (e.g. at /sys/fs/cgroup)"
		return c
	}
	if dir == "" {
		dir = mnt.dir
	}
	if err := cloneIntoRoundTrip(exe, mnt, dir); err != nil {
		c.Detail = err.Error()
		switch {
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.E2BIG):
			c.Hint = "the kernel is older than 5.7 (clone3 with CLONE_INTO_CGROUP); upgrade the kernel"
		default:
			c.Hint = "nsbox needs to create cgroups in the cgroup v2 tree: " + cgroupV2Hint
		}
		return c
	}
	c.OK, c.Detail = true, "child started inside a new cgroup"
	return c
}

func cloneIntoRoundTrip(exe string, mnt cgroup2Mount, parent string) error {
	dir, err := os.MkdirTemp(parent, "nsbox-doctor-")
	if err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	defer removeCgroup(dir)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	got, err := child{exe: exe, args: []string{"cgroup"}, sysAttrFn: func(a *syscall.SysProcAttr) {
		a.UseCgroupFD, a.CgroupFD = true, fd
	}}.run()
	if err != nil {
		return err
	}
	// The child's path is relative to our cgroup namespace, as is the
	// mount's root.
	rel, err := filepath.Rel(mnt.dir, dir)
	if err != nil {
		return fmt.Errorf("cgroup %s is not below the cgroup2 mount %s: %w", dir, mnt.dir, err)
	}
	if want := path.Join(mnt.root, rel); got != want {
		return fmt.Errorf("child started in cgroup %s, want %s", got, want)
	}
	return nil
}

// removeCgroup removes the temporary cgroup. The child has been reaped,
// but the kernel may report the cgroup busy for a moment after.
func removeCgroup(dir string) {
	for range 50 {
		if err := unix.Rmdir(dir); !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cgroup2Mount is where the cgroup v2 tree is mounted.
type cgroup2Mount struct {
	dir  string // mount point, e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified
	root string // the tree's path that is mounted there, usually "/"
}

// findCgroup2 returns the first cgroup2 mount of this mount namespace.
func findCgroup2() (cgroup2Mount, error) {
	const p = "/proc/self/mountinfo"
	f, err := os.Open(p)
	if err != nil {
		return cgroup2Mount{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		before, after, ok := strings.Cut(sc.Text(), " - ")
		fields, fs := strings.Fields(before), strings.Fields(after)
		if ok && len(fields) >= 5 && len(fs) >= 1 && fs[0] == "cgroup2" {
			return cgroup2Mount{dir: unescapeMountinfo(fields[4]), root: unescapeMountinfo(fields[3])}, nil
		}
	}
	if err := sc.Err(); err != nil {
		return cgroup2Mount{}, fmt.Errorf("read %s: %w", p, err)
	}
	return cgroup2Mount{}, errors.New("no cgroup2 mount")
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
