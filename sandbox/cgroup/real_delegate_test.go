package cgroup

// Rootless mode on the host's real cgroups: the test, as root, starts this
// test binary again as an unprivileged uid (nobody), directly or in a user
// namespace of its own where it is uid 0 (as nsbox's outer namespace), and
// that helper reports as JSON what detection found and what it could do.
// On a v1 host: not possible. On a v2 host (make test-v2's guest): in a
// subtree the test delegates to nobody the way systemd's Delegate=yes does,
// runs are created below it with their limits enforced, and cleaned up.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/userns"
)

// The helper's environment: what to do, and whether to go into a user
// namespace first.
const (
	helperEnv = "NSBOX_CGROUP_TEST_HELPER" // "detect", "delegated" or "force"
	usernsEnv = "NSBOX_CGROUP_TEST_USERNS" // "1": prepare, then do the rest in a new user namespace
	nobody    = 65534
)

// TestMain lets this test binary be the helper.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// helperReport is what the helper found, printed as JSON on stdout.
type helperReport struct {
	Euid       int
	Rootless   bool
	UsernsMap  string // this process's uid_map
	SelfBefore string // /proc/self/cgroup at start
	SelfAfter  string // and at the end
	Info       Info
	DetectErr  string
	NewErr     string // NewWithParent's error; "" when it created the run
	// delegated only
	RunDir             string
	MemoryMax, PidsMax string
	PidsMaxHit         uint64
	MaxMembers         int // processes seen at most in the pids run
	OOMKills           uint64
	Swept              []string
	SweptKilled        bool // the leftover's process died of SIGKILL
	Left               []string
}

func helperMain(mode string) int {
	if os.Getenv(usernsEnv) == "1" {
		// The outer process of nsbox's rootless mode: prepare the
		// subtree, then start the rest in a user namespace of its own.
		if err := PrepareDelegated(); err != nil {
			fmt.Fprintln(os.Stderr, "PrepareDelegated:", err)
			return 1
		}
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cmd := exec.Command(self)
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, usernsEnv+"=")
		}), usernsEnv+"=0")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "user namespace child:", err)
			return 1
		}
		return 0
	}
	r := helperReport{Euid: os.Geteuid(), Rootless: userns.Rootless(), SelfBefore: readProc("/proc/self/cgroup")}
	r.UsernsMap = readProc("/proc/self/uid_map")
	var err error
	r.Info, err = Detect()
	if err != nil {
		r.DetectErr = err.Error()
	}
	switch mode {
	case "delegated":
		err = r.useDelegated()
	case "force":
		// Past Detect's refusal: what the kernel says when the subtree
		// still holds another process.
		h, derr := detectHost()
		if derr != nil {
			return fail(derr)
		}
		r.NewErr = fmt.Sprint(h.enterDelegated())
	default:
		_, newErr := NewWithParent(DefaultParent, "helper", Limits{MemoryBytes: 32 << 20, Pids: 10, CPUs: 1})
		r.NewErr = fmt.Sprint(newErr)
		r.Swept, err = Sweep(func(string) bool { return false })
	}
	r.SelfAfter = readProc("/proc/self/cgroup")
	if jerr := json.NewEncoder(os.Stdout).Encode(r); jerr != nil {
		err = errors.Join(err, jerr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "helper:", err)
	return 1
}

func readProc(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}

// useDelegated creates runs below the delegated subtree, as a supervisor
// would: one that forks past pids.max, one that allocates past memory.max,
// one left with a process in it for Sweep.
func (r *helperReport) useDelegated() error {
	c, err := NewWithParent(DefaultParent, "pids", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	if err != nil {
		r.NewErr = err.Error()
		return err
	}
	r.RunDir = c.Paths()[v2Key]
	r.MemoryMax = readProc(filepath.Join(r.RunDir, "memory.max"))
	r.PidsMax = readProc(filepath.Join(r.RunDir, "pids.max"))
	// 30 forks against room for 9 besides the shell.
	cmd, err := startInto(c, "i=0; while [ $i -lt 30 ]; do sleep 20 & i=$((i+1)); done; wait")
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pids, err := c.members()
		if err != nil {
			return err
		}
		r.MaxMembers = max(r.MaxMembers, len(pids))
		s, err := c.Stats()
		if err != nil {
			return err
		}
		if r.PidsMaxHit = s.PidsMaxHit; r.PidsMaxHit > 0 {
			break
		}
	}
	if err := c.Destroy(); err != nil {
		return err
	}
	cmd.Wait()

	oom, err := NewWithParent(DefaultParent, "oom", Limits{MemoryBytes: 32 << 20, Pids: 10, CPUs: 1})
	if err != nil {
		return err
	}
	// tail keeps a newline-free input whole: it grows with what head sends, past the limit.
	cmd, err = startInto(oom, "head -c 200M /dev/zero | tail > /dev/null")
	if err != nil {
		return err
	}
	cmd.Wait()
	s, err := oom.Stats()
	if err != nil {
		return err
	}
	r.OOMKills = s.OOMKills
	if err := oom.Destroy(); err != nil {
		return err
	}

	// A crashed supervisor's run, swept.
	left, err := NewWithParent(DefaultParent, "leftover", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	if err != nil {
		return err
	}
	cmd, err = startInto(left, "sleep 60")
	if err != nil {
		return err
	}
	if r.Swept, err = Sweep(func(string) bool { return false }); err != nil {
		return err
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	r.SweptKilled = errors.As(werr, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
	entries, err := os.ReadDir(filepath.Dir(r.RunDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			r.Left = append(r.Left, e.Name())
		}
	}
	return nil
}

// startInto starts a shell running script straight into c
// (CLONE_INTO_CGROUP), as the supervisor starts a run's init.
func startInto(c *Cgroup, script string) (*exec.Cmd, error) {
	fd, ok := c.FD()
	if !ok {
		return nil, fmt.Errorf("no cgroup fd for %s", c.where())
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %q in %s: %w", script, c.where(), err)
	}
	return cmd, nil
}

// helperExe copies this test binary where nobody may execute it: go
// test's build directory is searchable by its owner only.
func helperExe(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "nsbox-cgroup-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	exe := filepath.Join(dir, "cgroup.test")
	dst, err := os.OpenFile(exe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return exe
}

// helperTimeout bounds one helper; under make test-v2's emulator every
// process start is slow.
const helperTimeout = 5 * time.Minute

// runHelper runs the helper as nobody, in cgroupDir when it is not "" and
// in a user namespace of its own when inUserns, and returns its report.
func runHelper(t *testing.T, exe, mode string, inUserns bool, cgroupDir string) helperReport {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, usernsEnv+"=0")
	if inUserns {
		cmd.Env = append(cmd.Env, usernsEnv+"=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if cgroupDir != "" {
		fd, err := unix.Open(cgroupDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the helper: %v", err)
	}
	timer := time.AfterFunc(helperTimeout, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	if err != nil {
		t.Fatalf("helper %s (user namespace %v): %v\nstdout: %s\nstderr: %s", mode, inUserns, err, stdout.Bytes(), stderr.Bytes())
	}
	var r helperReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("helper's report: %v\n%s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("helper %s (user namespace %v): euid %d, in %q; delegation %+v, missing %q, hint %q; new: %s; "+
		"pids.max hit %d (at most %d processes), OOM kills %d, swept %q",
		mode, inUserns, r.Euid, r.SelfAfter, r.Info.Delegation, r.Info.Missing, r.Info.Hint, r.NewErr,
		r.PidsMaxHit, r.MaxMembers, r.OOMKills, r.Swept)
	return r
}

// checkRootless checks the helper ran rootless: as nobody, or as uid 0 of
// a user namespace mapping nobody.
func checkRootless(t *testing.T, r helperReport, inUserns bool) {
	t.Helper()
	wantEuid := nobody
	if inUserns {
		wantEuid = 0
		if f := strings.Fields(r.UsernsMap); len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(nobody) {
			t.Errorf("helper's uid_map %q, want 0 %d 1", r.UsernsMap, nobody)
		}
	}
	if r.Euid != wantEuid || !r.Rootless {
		t.Errorf("helper: euid %d, rootless %v; want %d, true", r.Euid, r.Rootless, wantEuid)
	}
}

// TestRealRootlessV1NotPossible: on a cgroup v1 (or hybrid) host, an
// unprivileged nsbox, plain or in its own user namespace, finds that no
// cgroup can be delegated to it, says how to get one, refuses to create
// a run's cgroup and sweeps nothing.
func TestRealRootlessV1NotPossible(t *testing.T) {
	h := realHost(t)
	if h.version != 1 {
		t.Skip("a cgroup v1 host's answer; TestRealRootlessDelegated covers v2")
	}
	exe := helperExe(t)
	for _, inUserns := range []bool{false, true} {
		r := runHelper(t, exe, "detect", inUserns, "")
		checkRootless(t, r, inUserns)
		d := r.Info.Delegation
		if r.DetectErr != "" || r.Info.Version != 1 || d == nil || d.Usable || d.Why != whyRootlessV1 {
			t.Errorf("userns %v: Detect = %+v, %s; want v1, not possible", inUserns, r.Info, r.DetectErr)
		}
		for _, want := range []string{"run nsbox as root", "cgroup v2", "systemd-run --user --scope -p Delegate=yes"} {
			if !strings.Contains(r.Info.Hint, want) {
				t.Errorf("userns %v: Hint %q lacks %q", inUserns, r.Info.Hint, want)
			}
		}
		if !strings.Contains(r.NewErr, ErrUnavailable.Error()) || !strings.Contains(r.NewErr, "cannot be delegated") {
			t.Errorf("userns %v: New: %s, want %v saying why", inUserns, r.NewErr, ErrUnavailable)
		}
		if len(r.Swept) != 0 {
			t.Errorf("userns %v: Sweep removed %q", inUserns, r.Swept)
		}
	}
}

// delegateTo makes dir a cgroup delegated to uid, as systemd does for
// Delegate=yes: the directory and the files that move processes and
// enable controllers become the user's.
func delegateTo(t *testing.T, dir string, uid int) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control"),
		filepath.Join(dir, "cgroup.threads")} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// testTree makes a cgroup of the test's own at the v2 root, with the needed
// controllers reaching its children (as user@.service's are), and removes
// it, killing what is left in it, when the test ends.
func testTree(t *testing.T, h *host) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(h.v2root, "nsbox-test-"+hex.EncodeToString(b[:]))
	if err := enableControllers(h.v2root); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cgroups.WriteFile(dir, "cgroup.kill", "1"); err != nil {
			t.Errorf("cleanup: kill %s: %v", dir, err)
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if pids, err := cgroups.GetAllPids(dir); err != nil || len(pids) == 0 {
				break
			}
		}
		if err := cgroups.RemovePath(dir); err != nil {
			t.Errorf("cleanup: remove %s: %v", dir, err)
		}
	})
	if err := enableControllers(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRealRootlessDelegated: on a cgroup v2 host, an unprivileged nsbox
// started in a subtree delegated to it (plain, or preparing it and then
// working from its own user namespace, as nsbox's rootless mode does)
// finds it, moves itself into the leaf, creates runs below it with
// memory.max and pids.max enforced, and removes them; one started in a
// cgroup that is not delegated, or that holds another process, is told
// why it cannot.
func TestRealRootlessDelegated(t *testing.T) {
	h := realHost(t)
	if h.version != 2 {
		t.Skip("needs a cgroup v2 host: make test-v2 runs it in one")
	}
	exe := helperExe(t)
	tree := testTree(t, h)

	for _, inUserns := range []bool{false, true} {
		scope := filepath.Join(tree, fmt.Sprintf("delegated-userns-%v.scope", inUserns))
		delegateTo(t, scope, nobody)
		r := runHelper(t, exe, "delegated", inUserns, scope)
		checkRootless(t, r, inUserns)
		d := r.Info.Delegation
		if r.DetectErr != "" || d == nil || !d.Usable || d.Path != scope || len(r.Info.Missing) != 0 {
			t.Errorf("userns %v: Detect = %+v, %s; want usable at %s", inUserns, r.Info, r.DetectErr, scope)
			continue
		}
		rel := strings.TrimPrefix(scope, h.v2root)
		if want := "0::" + rel + "/" + LeafName; r.SelfAfter != want {
			t.Errorf("userns %v: helper ended in %q, want %q", inUserns, r.SelfAfter, want)
		}
		if want := filepath.Join(scope, DefaultParent, "pids"); r.RunDir != want || r.NewErr != "" {
			t.Errorf("userns %v: run cgroup %s (%s), want %s", inUserns, r.RunDir, r.NewErr, want)
		}
		if r.MemoryMax != "67108864" || r.PidsMax != "10" {
			t.Errorf("userns %v: memory.max %s, pids.max %s; want 67108864, 10", inUserns, r.MemoryMax, r.PidsMax)
		}
		if r.PidsMaxHit < 1 || r.MaxMembers > 10 || r.MaxMembers < 2 {
			t.Errorf("userns %v: pids.max hit %d times, %d processes at most; want hit, at most 10", inUserns, r.PidsMaxHit, r.MaxMembers)
		}
		if r.OOMKills < 1 {
			t.Errorf("userns %v: %d OOM kills, want at least 1", inUserns, r.OOMKills)
		}
		if !slices.Equal(r.Swept, []string{"leftover"}) || !r.SweptKilled || len(r.Left) != 0 {
			t.Errorf("userns %v: swept %q (killed %v), left %q; want leftover swept, nothing left", inUserns, r.Swept, r.SweptKilled, r.Left)
		}
		if got := readFile(t, filepath.Join(scope, "cgroup.subtree_control")); got != "cpu memory pids" {
			t.Errorf("userns %v: %s/cgroup.subtree_control = %q", inUserns, scope, got)
		}
		if pids, err := cgroups.GetAllPids(scope); err != nil || len(pids) != 0 {
			t.Errorf("userns %v: processes left in %s: %v, %v", inUserns, scope, pids, err)
		}
	}

	// Not delegated: the cgroup stays root's.
	plain := filepath.Join(tree, "root-owned.scope")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, inUserns := range []bool{false, true} {
		r := runHelper(t, exe, "detect", inUserns, plain)
		checkRootless(t, r, inUserns)
		if d := r.Info.Delegation; d == nil || d.Usable || !strings.Contains(d.Why, "not delegated") ||
			!strings.Contains(r.Info.Hint, "systemd-run --user --scope -p Delegate=yes") {
			t.Errorf("userns %v: root's cgroup: %+v, hint %q; want not delegated, with the fix", inUserns, d, r.Info.Hint)
		}
		if !strings.Contains(r.NewErr, ErrUnavailable.Error()) {
			t.Errorf("userns %v: New in root's cgroup: %s", inUserns, r.NewErr)
		}
	}

	// Delegated, but another process lives in it.
	busy := filepath.Join(tree, "busy.scope")
	delegateTo(t, busy, nobody)
	other := startChild(t, "sleep", "60")
	if err := cgroups.WriteCgroupProc(busy, other.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	r := runHelper(t, exe, "detect", false, busy)
	if d := r.Info.Delegation; d == nil || d.Usable || !strings.Contains(d.Why, strconv.Itoa(other.cmd.Process.Pid)) ||
		!strings.Contains(r.Info.Hint, "scope of its own") {
		t.Errorf("busy scope: %+v, hint %q; want unusable naming pid %d", d, r.Info.Hint, other.cmd.Process.Pid)
	}
	if entries, err := os.ReadDir(busy); err != nil || slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() }) {
		t.Errorf("busy scope: something was created in %s (%v)", busy, err)
	}
	// Forced past Detect, the kernel refuses the controllers (EBUSY), and
	// the error names the other process and the fix.
	r = runHelper(t, exe, "force", false, busy)
	if !strings.Contains(r.NewErr, ErrUnavailable.Error()) || !strings.Contains(r.NewErr, strconv.Itoa(other.cmd.Process.Pid)) ||
		!strings.Contains(r.NewErr, "scope of its own") {
		t.Errorf("busy scope, forced: %s; want %v naming pid %d and the fix", r.NewErr, ErrUnavailable, other.cmd.Process.Pid)
	}
	if got := readFile(t, filepath.Join(busy, "cgroup.subtree_control")); got != "" {
		t.Errorf("busy scope, forced: cgroup.subtree_control = %q, want empty", got)
	}
}
