package cgroup

// Tests of the v2 code over a fake cgroupfs tree (see fakeV2): they run
// anywhere, without root.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// impossiblePid is above PID_MAX_LIMIT (4194304): no process can have it,
// so a fake cgroup.procs can list it without risk.
const impossiblePid = "4194305"

var testLimits = Limits{MemoryBytes: 64 << 20, SocketBytes: 8 << 20, Pids: 20, CPUs: 1.5}

// TestV2NewWritesLimits checks what nsbox writes on v2. memory.max is the
// whole memory limit, SocketBytes not taken off it, and nothing is written
// for sockets: v2 charges socket buffers to memory.max itself
// (mm/memcontrol.c: mem_cgroup_sk_alloc attaches every new socket to the
// creating task's memory cgroup unless cgroup.memory=nosocket, and
// mem_cgroup_charge_skmem charges its buffers with try_charge, the same
// counter as the rest of the run's memory; Documentation/admin-guide/
// cgroup-v2.rst lists "TCP socket buffers" among what the memory
// controller tracks).
func TestV2NewWritesLimits(t *testing.T) {
	h := fakeV2(t, "cpuset cpu io memory hugetlb pids rdma misc", fakeOpts{})
	c, err := h.create("nsbox-test/nested", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.v2root, "nsbox-test", "nested", "run1")
	for file, want := range map[string]string{
		"memory.max":       "67108864",
		"memory.swap.max":  "0", // memory+swap == memory: no swap
		"pids.max":         "20",
		"cpu.max":          "150000 100000",
		"memory.oom.group": "1",
	} {
		if got := readFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// Every ancestor delegates exactly the needed controllers.
	for _, d := range []string{h.v2root, filepath.Join(h.v2root, "nsbox-test"), filepath.Join(h.v2root, "nsbox-test", "nested")} {
		got := strings.Fields(readFile(t, filepath.Join(d, "cgroup.subtree_control")))
		if want := []string{"+memory", "+pids", "+cpu"}; !slices.Equal(got, want) {
			t.Errorf("%s/cgroup.subtree_control = %q, want %q", d, got, want)
		}
	}
	// No v1 socket file, on v2 or not.
	if _, err := os.Stat(filepath.Join(dir, tcpLimitFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s written on v2: %v", tcpLimitFile, err)
	}
	// The leaf holds processes, so it must not delegate anything.
	if got := readFile(t, filepath.Join(dir, "cgroup.subtree_control")); got != "" {
		t.Errorf("leaf cgroup.subtree_control = %q, want empty", got)
	}
	if c.Version() != 2 {
		t.Errorf("Version() = %d, want 2", c.Version())
	}
	if got := c.Paths(); len(got) != 1 || got["unified"] != dir {
		t.Errorf("Paths() = %v, want unified: %s", got, dir)
	}
	fd, ok := c.FD()
	if !ok {
		t.Fatal("FD() not ok on v2")
	}
	var fdSt, dirSt unix.Stat_t
	if err := unix.Fstat(fd, &fdSt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(dir, &dirSt); err != nil {
		t.Fatal(err)
	}
	if fdSt.Ino != dirSt.Ino || fdSt.Dev != dirSt.Dev {
		t.Errorf("FD() is not %s", dir)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("FD still open after Destroy: %v", err)
	}
}

func TestV2NewRefusesExistingName(t *testing.T) {
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	if _, err := h.create("nsbox-test", "run1", testLimits); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.v2root, "nsbox-test", "run1")
	_, err := h.create("nsbox-test", "run1", testLimits)
	if err == nil || !strings.Contains(err.Error(), dir) || !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v, want an already-exists error naming %s", err, dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the existing cgroup was touched: %v", err)
	}
}

func TestV2NewRefusesUndelegatedLeaf(t *testing.T) {
	// The root offers pids, but the "kernel" never delegates it: New must
	// notice at the leaf, refuse, and leave no leaf behind.
	h := fakeV2(t, "cpu memory pids", fakeOpts{drop: "pids"})
	_, err := h.create("nsbox-test", "run1", testLimits)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "pids") {
		t.Fatalf("create: %v, want ErrUnavailable naming pids", err)
	}
	if _, err := os.Stat(filepath.Join(h.v2root, "nsbox-test", "run1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leaf left behind: %v", err)
	}
}

func TestV2DetectMissingControllers(t *testing.T) {
	h := fakeV2(t, "cpu io", fakeOpts{})
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 2 || !slices.Equal(info.Missing, []string{"memory", "pids"}) {
		t.Errorf("Version %d, Missing %q; want 2, [memory pids]", info.Version, info.Missing)
	}
	if info.Controllers["cpu"] != h.v2root {
		t.Errorf("Controllers = %v, want cpu at %s", info.Controllers, h.v2root)
	}
	if !strings.Contains(info.Hint, "Delegate=yes") {
		t.Errorf("Hint %q does not mention Delegate=yes", info.Hint)
	}
	// Fail closed, before creating anything.
	if _, err := h.create("nsbox-test", "run1", testLimits); !errors.Is(err, ErrUnavailable) {
		t.Errorf("create: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(filepath.Join(h.v2root, "nsbox-test")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("create made the parent although it refused: %v", err)
	}
}

// TestV2DetectNoSocket: a kernel booted with cgroup.memory=nosocket does
// not charge socket buffers to memory.max, so runs are refused; any other
// command line leaves them charged.
func TestV2DetectNoSocket(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		refused bool
	}{
		{"console=ttyS0 quiet\n", false},
		{"cgroup.memory=nokmem\n", false},
		{"cgroup.memory=nokmem,nosocket quiet\n", true},
		{"cgroup.memory=nosocket\n", true},
		{"quiet -- cgroup.memory=nosocket\n", false}, // after "--": init's, not the kernel's
	} {
		h := fakeV2(t, "cpu memory pids", fakeOpts{})
		h.cmdline = filepath.Join(t.TempDir(), "cmdline")
		writeFiles(t, filepath.Dir(h.cmdline), map[string]string{"cmdline": tc.cmdline})
		info, err := h.info()
		if err != nil {
			t.Fatal(err)
		}
		if refused := slices.Contains(info.Missing, SocketMemory); refused != tc.refused || refused == (info.Sockets != "") {
			t.Errorf("%q: Missing %q, Sockets %q; want socket memory refused=%v", tc.cmdline, info.Missing, info.Sockets, tc.refused)
		}
		if tc.refused && !strings.Contains(info.Hint, "nosocket") {
			t.Errorf("%q: hint %q does not name nosocket", tc.cmdline, info.Hint)
		}
	}
}

func TestV2DetectInternalProcesses(t *testing.T) {
	// A container's cgroup namespace root: not the real root (it has
	// cgroup.type), with processes in it and nothing enabled yet.
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	writeFiles(t, h.v2root, map[string]string{"cgroup.type": "domain\n", "cgroup.procs": "1\n7\n"})
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Missing, []string{"memory", "pids", "cpu"}) || !strings.Contains(info.Hint, "no internal processes") {
		t.Errorf("Missing %q, Hint %q; want all three and the no-internal-processes fix", info.Missing, info.Hint)
	}
	// Once the processes moved to a leaf and the controllers were
	// enabled, all is usable.
	writeFiles(t, h.v2root, map[string]string{"cgroup.procs": "", "cgroup.subtree_control": "memory pids cpu\n"})
	if info, err = h.info(); err != nil || len(info.Missing) != 0 || info.Hint != "" {
		t.Errorf("after the fix: %+v, %v; want nothing missing", info, err)
	}
}

func TestV2Stats(t *testing.T) {
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	c, err := h.create("nsbox-test", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Paths()["unified"]
	writeFiles(t, dir, map[string]string{
		"cpu.stat":      "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnr_periods 3\n",
		"memory.peak":   "12345678\n",
		"memory.events": "low 0\nhigh 0\nmax 9\noom 2\noom_kill 3\noom_group_kill 1\n",
		"pids.events":   "max 7\n",
	})
	got, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{CPU: 1500 * time.Millisecond, PeakMemory: 12345678, OOMKills: 3, PidsMaxHit: 7}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	// Older kernels: no memory.peak (before 5.19), no pids.events.
	for _, f := range []string{"memory.peak", "pids.events"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err = c.Stats(); err != nil || got.PeakMemory != 0 || got.PidsMaxHit != 0 || got.OOMKills != 3 {
		t.Errorf("Stats() without memory.peak and pids.events = %+v, %v", got, err)
	}
}

func TestV2KillWritesCgroupKill(t *testing.T) {
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	c, err := h.create("nsbox-test", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Paths()["unified"]
	writeFiles(t, dir, map[string]string{"cgroup.procs": impossiblePid + "\n"})
	emulateKill(t, dir)
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.kill")); got != "1" {
		t.Errorf("cgroup.kill = %q, want 1", got)
	}
}

func TestV2KillGivesUpAtDeadline(t *testing.T) {
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	c, err := h.create("nsbox-test", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Paths()["unified"]
	// Nobody plays the kernel: the process never leaves.
	writeFiles(t, dir, map[string]string{"cgroup.procs": impossiblePid + "\n"})
	start := time.Now()
	err = c.Kill()
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), impossiblePid) {
		t.Fatalf("Kill: %v, want an error naming %s and the pid", err, dir)
	}
	if d := time.Since(start); d < h.killTimeout || d > h.killTimeout+2*time.Second {
		t.Errorf("Kill gave up after %s, want about %s", d, h.killTimeout)
	}
	// Destroy must not remove a cgroup it could not empty.
	if err := c.Destroy(); err == nil {
		t.Error("Destroy succeeded on a cgroup that cannot be emptied")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("Destroy removed a populated cgroup: %v", err)
	}
}

func TestV2KillWithoutCgroupKillSignals(t *testing.T) {
	// Before cgroup.kill, Kill must SIGKILL each member itself.
	h := fakeV2(t, "cpu memory pids", fakeOpts{noKill: true})
	h.killTimeout = 5 * time.Second
	c, err := h.create("nsbox-test", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Paths()["unified"]
	ch := startChild(t, "sleep", "30")
	writeFiles(t, dir, map[string]string{"cgroup.procs": strconv.Itoa(ch.cmd.Process.Pid) + "\n"})
	// Play the kernel: a dead (and reaped) process leaves cgroup.procs.
	go func() {
		<-ch.exited
		os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644)
	}()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ch.wantKilled(t)
}

func TestV2DestroyIsIdempotent(t *testing.T) {
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	c, err := h.create("nsbox-test", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Paths()["unified"]
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); err != nil {
		t.Errorf("Destroy removed the shared parent: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if err := c.Kill(); err != nil {
		t.Errorf("Kill after Destroy: %v", err)
	}
	if _, ok := c.FD(); ok {
		t.Error("FD() ok after Destroy")
	}
	if _, err := c.Stats(); err == nil {
		t.Error("Stats() after Destroy succeeded")
	}
	if err := c.Add(1); err == nil {
		t.Error("Add() after Destroy succeeded")
	}
}

func TestV2Sweep(t *testing.T) {
	h := fakeV2(t, "cpu memory pids", fakeOpts{})
	for _, name := range []string{"dead1", "alive", "dead2"} {
		if _, err := h.create("nsbox-test", name, testLimits); err != nil {
			t.Fatal(err)
		}
	}
	parent := filepath.Join(h.v2root, "nsbox-test")
	// A leftover with a process in it gets killed first.
	writeFiles(t, filepath.Join(parent, "dead1"), map[string]string{"cgroup.procs": impossiblePid + "\n"})
	emulateKill(t, filepath.Join(parent, "dead1"))
	// A directory nsbox would not have made is left alone.
	if err := os.Mkdir(filepath.Join(parent, ".hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := h.sweep("nsbox-test", func(name string) bool { return name == "alive" })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dead1", "dead2"}; !slices.Equal(removed, want) {
		t.Errorf("sweep removed %q, want %q", removed, want)
	}
	for name, want := range map[string]bool{"dead1": false, "dead2": false, "alive": true, ".hidden": true} {
		_, err := os.Stat(filepath.Join(parent, name))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", name, got, want)
		}
	}
	// Nothing to sweep under a parent that was never made.
	if removed, err := h.sweep("nsbox-none", func(string) bool { return false }); err != nil || len(removed) != 0 {
		t.Errorf("sweep of a missing parent: %q, %v", removed, err)
	}
}
