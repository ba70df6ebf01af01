package cgroup

// Tests on the host's real cgroups, as root. Each creates its cgroups under
// a parent of its own (nsbox-test-<random>), never touches any other
// cgroup, and removes its parent, after killing what is left, even when it
// fails. On a v1 host they exercise the fs manager; on a v2 host the fs2
// one. They skip without root or usable controllers, and fail instead
// under NSBOX_MUST_WORK=1.

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/mustwork"
)

// realHost returns the host's cgroup setup, or skips.
func realHost(t *testing.T) *host {
	t.Helper()
	mustwork.NeedRoot(t)
	h, err := detectHost()
	if err != nil {
		t.Fatal(err)
	}
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Missing) > 0 {
		mustwork.Skip(t, "cgroup controllers missing: %q (%s)", info.Missing, info.Hint)
	}
	return h
}

// testParent returns a parent unique to the test, removed at its end.
func testParent(t *testing.T, h *host) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	parent := "nsbox-test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if _, err := SweepParent(parent, func(string) bool { return false }); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, dir := range h.parentDirs(parent) {
			if err := cgroups.RemovePath(dir); err != nil {
				t.Errorf("cleanup: remove %s: %v", dir, err)
			}
		}
	})
	return parent
}

// newReal creates a run cgroup under the test's parent.
func newReal(t *testing.T, h *host, parent, name string, l Limits) *Cgroup {
	t.Helper()
	c, err := NewWithParent(parent, name, l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pidsKey is the Paths key of the directory with pids.* files.
func pidsKey(h *host) string {
	if h.version == 2 {
		return v2Key
	}
	return "pids"
}

// startIn starts a shell running script in c, blocked until released (the
// way the init waits for "go"): it is placed with Add on both versions.
func startIn(t *testing.T, c *Cgroup, script string) *child {
	t.Helper()
	ch := startChild(t, "/bin/sh", "-c", "read _; "+script)
	if err := c.Add(ch.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestRealDetect(t *testing.T) {
	mustwork.NeedRoot(t)
	info, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		t.Fatal(err)
	}
	want := 1
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		want = 2
	}
	if info.Version != want {
		t.Errorf("Version = %d, want %d", info.Version, want)
	}
	if len(info.Missing) > 0 {
		mustwork.Skip(t, "cgroup controllers missing: %q (%s)", info.Missing, info.Hint)
	}
	if info.Hint != "" {
		t.Errorf("Hint %q with nothing missing", info.Hint)
	}
	needed := neededV2
	if want == 1 {
		needed = neededV1
	}
	for _, ctrl := range needed {
		if fi, err := os.Stat(info.Controllers[ctrl]); err != nil || !fi.IsDir() {
			t.Errorf("Controllers[%s] = %q: %v", ctrl, info.Controllers[ctrl], err)
		}
	}
	t.Logf("%+v", info)
}

func TestRealNewSetsLimits(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "limits", Limits{MemoryBytes: 32 << 20, SocketBytes: 4 << 20, Pids: 10, CPUs: 0.5})
	paths := c.Paths()
	want := map[string]string{}
	if h.version == 1 {
		for _, ctrl := range neededV1 {
			if fi, err := os.Stat(paths[ctrl]); err != nil || !fi.IsDir() {
				t.Errorf("Paths()[%s] = %q: %v", ctrl, paths[ctrl], err)
			}
		}
		// v1: the socket buffers' share comes off the memory limit.
		want[filepath.Join(paths["memory"], "memory.limit_in_bytes")] = "29360128"
		want[filepath.Join(paths["memory"], tcpLimitFile)] = "4194304"
		if hasMemsw(h.v1["memory"]) {
			want[filepath.Join(paths["memory"], "memory.memsw.limit_in_bytes")] = "29360128"
		} else {
			want[filepath.Join(paths["memory"], "memory.swappiness")] = "0"
		}
		want[filepath.Join(paths["pids"], "pids.max")] = "10"
		want[filepath.Join(paths["cpu"], "cpu.cfs_quota_us")] = "50000"
		want[filepath.Join(paths["cpu"], "cpu.cfs_period_us")] = "100000"
		if _, ok := c.FD(); ok {
			t.Error("FD() ok on v1")
		}
	} else {
		dir := paths["unified"]
		want[filepath.Join(dir, "memory.max")] = "33554432"
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			want[filepath.Join(dir, "memory.swap.max")] = "0"
		}
		want[filepath.Join(dir, "pids.max")] = "10"
		want[filepath.Join(dir, "cpu.max")] = "50000 100000"
		want[filepath.Join(dir, "memory.oom.group")] = "1"
		if _, ok := c.FD(); !ok {
			t.Error("FD() not ok on v2")
		}
	}
	for path, w := range want {
		if got := readFile(t, path); got != w {
			t.Errorf("%s = %q, want %q", path, got, w)
		}
	}
}

// TestRealNoSocketBuffers: SocketBytes 0, what a run whose filter refuses
// TCP and UDP sockets gets, is a limit the v1 kernel takes: no socket
// buffers at all, and the whole memory limit for the rest.
func TestRealNoSocketBuffers(t *testing.T) {
	h := realHost(t)
	if h.version != 1 {
		t.Skip("memory.kmem.tcp is v1's")
	}
	c := newReal(t, h, testParent(t, h), "nosockets", Limits{MemoryBytes: 32 << 20, Pids: 10, CPUs: 0.5})
	for file, want := range map[string]string{tcpLimitFile: "0", "memory.limit_in_bytes": "33554432"} {
		if got := readFile(t, filepath.Join(c.Paths()["memory"], file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
}

func TestRealNewRefusesExistingAndBadNames(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	l := Limits{MemoryBytes: 32 << 20, Pids: 10, CPUs: 1}
	newReal(t, h, parent, "taken", l)
	if _, err := NewWithParent(parent, "taken", l); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second New: %v, want already exists", err)
	}
	for _, name := range []string{"..", "a/b", ""} {
		if c, err := NewWithParent(parent, name, l); err == nil {
			t.Errorf("New(%q) succeeded: %v", name, c.Paths())
		}
	}
	if _, err := NewWithParent(parent, "nolimits", Limits{}); err == nil {
		t.Error("New without limits succeeded")
	}
	for _, dir := range h.parentDirs(parent) {
		if _, err := os.Stat(filepath.Join(dir, "nolimits")); err == nil {
			t.Errorf("refused New left %s/nolimits", dir)
		}
	}
}

func TestRealAddAndKill(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "add", Limits{MemoryBytes: 64 << 20, Pids: 20, CPUs: 1})
	ch := startChild(t, "sleep", "30")
	pid := ch.cmd.Process.Pid
	if err := c.Add(pid); err != nil {
		t.Fatal(err)
	}
	for _, dir := range c.dirs() {
		pids, err := cgroups.GetPids(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pids, []int{pid}) {
			t.Errorf("%s/cgroup.procs = %v, want [%d]", dir, pids, pid)
		}
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ch.wantKilled(t)
	for _, dir := range c.dirs() {
		if pids, err := cgroups.GetPids(dir); err != nil || len(pids) != 0 {
			t.Errorf("%s/cgroup.procs after Kill = %v, %v; want empty", dir, pids, err)
		}
	}
	// Killing an empty cgroup is fine.
	if err := c.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
}

func TestRealKillForkingProcesses(t *testing.T) {
	// A program that keeps forking (subshells that double-fork sleeps,
	// bounded by pids.max) must not outrun Kill.
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "forker", Limits{MemoryBytes: 128 << 20, Pids: 40, CPUs: 1})
	ch := startIn(t, c, "while :; do (sleep 30 &) 2>/dev/null; done")
	ch.release()
	// Let it fill the cgroup.
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := c.members()
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) >= 20 || time.Now().After(deadline) {
			t.Logf("%d processes before Kill", len(pids))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ch.wantKilled(t)
	if pids, err := c.members(); err != nil || len(pids) != 0 {
		t.Errorf("after Kill: %v, %v; want empty", pids, err)
	}
}

func TestRealStatsCPU(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "cpu", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	ch := startIn(t, c, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	ch.release()
	if err := ch.wait(t, 20*time.Second); err != nil {
		t.Fatalf("busy child: %v", err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU < 10*time.Millisecond {
		t.Errorf("Stats().CPU = %s, want the busy loop's CPU time", s.CPU)
	}
	if s.OOMKills != 0 || s.PidsMaxHit != 0 {
		t.Errorf("Stats() = %+v, want no OOM kills, no pids.max hits", s)
	}
	t.Logf("%+v", s)
}

func TestRealOOM(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "oom", Limits{MemoryBytes: 32 << 20, Pids: 10, CPUs: 1})
	// tail keeps a newline-free input whole: it grows with what head sends, past the limit.
	ch := startIn(t, c, "head -c 200M /dev/zero | tail > /dev/null")
	ch.release()
	err := ch.wait(t, 20*time.Second)
	t.Logf("allocating child: %v", err)
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.OOMKills < 1 {
		t.Errorf("Stats().OOMKills = %d, want >= 1", s.OOMKills)
	}
	if s.PeakMemory < 16<<20 || s.PeakMemory > 40<<20 {
		t.Errorf("Stats().PeakMemory = %d, want about the 32 MiB limit", s.PeakMemory)
	}
	t.Logf("%+v", s)
}

func TestRealPidsLimit(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "pids", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	// 50 forks at most, against room for 9 besides the shell.
	ch := startIn(t, c, "i=0; while [ $i -lt 50 ]; do sleep 5 & i=$((i+1)); done; wait")
	ch.release()
	deadline := time.Now().Add(10 * time.Second)
	var s Stats
	for {
		var err error
		if s, err = c.Stats(); err != nil {
			t.Fatal(err)
		}
		if s.PidsMaxHit > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// pids.events is in v2 and in v1 since Linux 4.5ish; without it only
	// the count below shows the limit.
	if _, err := os.Stat(filepath.Join(c.Paths()[pidsKey(h)], "pids.events")); err == nil && s.PidsMaxHit < 1 {
		t.Errorf("Stats().PidsMaxHit = %d, want >= 1", s.PidsMaxHit)
	}
	if pids, err := c.members(); err != nil || len(pids) > 10 {
		t.Errorf("%d processes in a cgroup with pids.max 10 (%v)", len(pids), err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", s)
}

func TestRealDestroy(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	c := newReal(t, h, parent, "destroy", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	ch := startChild(t, "sleep", "30")
	if err := c.Add(ch.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	dirs := c.dirs()
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	ch.wantKilled(t)
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after Destroy: %v", dir, err)
		}
		if _, err := os.Stat(filepath.Dir(dir)); err != nil {
			t.Errorf("Destroy removed the shared parent %s: %v", filepath.Dir(dir), err)
		}
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

func TestRealSweep(t *testing.T) {
	h := realHost(t)
	parent := testParent(t, h)
	l := Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1}
	// A crashed supervisor's run: its cgroup object is gone, a process
	// is still in it.
	dead := newReal(t, h, parent, "dead", l)
	ch := startChild(t, "sleep", "30")
	if err := dead.Add(ch.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	deadDirs := dead.dirs()
	alive := newReal(t, h, parent, "alive", l)

	removed, err := SweepParent(parent, func(name string) bool { return name == "alive" })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"dead"}) {
		t.Errorf("Sweep removed %q, want [dead]", removed)
	}
	ch.wantKilled(t)
	for _, dir := range deadDirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after Sweep: %v", dir, err)
		}
	}
	for _, dir := range alive.dirs() {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("Sweep removed the live %s: %v", dir, err)
		}
	}
	if err := alive.Destroy(); err != nil {
		t.Fatal(err)
	}
}
