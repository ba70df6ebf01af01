package cgroup

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRealOpenTasks: a process handed the tasks files attaches itself to
// every hierarchy by writing "0" to each while running as nobody, who
// could not open them itself (cgroup v1 checks the opener's credentials),
// and what it forks afterwards is inside too. The files are write-only
// and close-on-exec in the opener.
func TestRealOpenTasks(t *testing.T) {
	h := realHost(t)
	if h.version != 1 {
		t.Skip("tasks files are cgroup v1's; v2 clones into the cgroup")
	}
	parent := testParent(t, h)
	c := newReal(t, h, parent, "selfattach", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	files, err := c.OpenTasks()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	dirs := c.dirs()
	if len(files) != len(dirs) {
		t.Fatalf("%d files for %d directories", len(files), len(dirs))
	}
	var redirects []string
	for i, f := range files {
		if want := filepath.Join(dirs[i], "tasks"); f.Name() != want {
			t.Errorf("file %d is %s, want %s", i, f.Name(), want)
		}
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_ACCMODE != unix.O_WRONLY {
			t.Errorf("%s: flags %#x, %v; want O_WRONLY", f.Name(), fl, err)
		}
		fd, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		if err != nil || fd&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: fd flags %#x, %v; want FD_CLOEXEC", f.Name(), fd, err)
		}
		redirects = append(redirects, "echo 0 >&"+strconv.Itoa(3+i))
	}

	script := "(echo 0 > " + files[0].Name() + ") 2>/dev/null && echo REOPENED; " +
		strings.Join(redirects, " && ") + " && cat /proc/self/cgroup"
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("attaching child: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "REOPENED") {
		t.Errorf("nobody opened %s itself: the test proves nothing", files[0].Name())
	}
	rel := "/" + parent + "/selfattach"
	for ctrl, dir := range c.Paths() {
		if !hasCgroupLine(string(out), ctrl, rel) {
			t.Errorf("child's /proc/self/cgroup lacks %s:%s (dir %s):\n%s", ctrl, rel, dir, out)
		}
	}

	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if f, err := c.OpenTasks(); err == nil {
		t.Errorf("OpenTasks after Destroy gave %v", f)
	}
}

// hasCgroupLine reports whether a /proc/PID/cgroup text puts ctrl's
// hierarchy at path.
func hasCgroupLine(text, ctrl, path string) bool {
	for _, line := range strings.Split(text, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[2] != path {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == ctrl {
				return true
			}
		}
	}
	return false
}
