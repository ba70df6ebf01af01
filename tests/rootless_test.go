package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/result"
)

// Rootless mode, tested as a real unprivileged user: the account below,
// created here on first use (useradd) with a subordinate id range of its
// own (/etc/subuid, /etc/subgid). Every test runs the nsbox binary under
// test as that user, with a fresh home of its own, so its state, audit
// log and roots are the XDG defaults under it.

// rootlessUserName is the account the rootless tests run nsbox as.
const rootlessUserName = "nsbox-rootless"

// rootlessSubIDs is its subordinate range: clear of the suite's host id
// blocks and of supervisor.DefaultIDRange.
const (
	rootlessSubStart = 1_900_000_000
	rootlessSubCount = 65536
)

// rootlessUser is the test account, created if missing.
type rootlessUser struct {
	uid, gid int
	home     string // a fresh home, the user's own
}

// newRootlessUser makes sure the account exists with its subordinate
// ranges, and gives it a fresh home under /tmp.
func newRootlessUser(t *testing.T) *rootlessUser {
	t.Helper()
	needRoot(t)
	mustHave(t, "useradd")
	if _, err := user.Lookup(rootlessUserName); err != nil {
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", rootlessUserName).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v: %s", rootlessUserName, err, out)
		}
	}
	u, err := user.Lookup(rootlessUserName)
	if err != nil {
		t.Fatalf("look up %s: %v", rootlessUserName, err)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if !strings.Contains("\n"+string(b), "\n"+rootlessUserName+":") {
			appendLine(t, f, fmt.Sprintf("%s:%d:%d", rootlessUserName, rootlessSubStart, rootlessSubCount))
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home, err := os.MkdirTemp("", "nsbox-rootless-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	// The binary under test must be reachable by the user.
	for d := filepath.Dir(nsboxBin); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			t.Fatalf("%s is not searchable by others: the user cannot run %s", d, nsboxBin)
		}
	}
	return &rootlessUser{uid: uid, gid: gid, home: home}
}

// appendLine adds one line to a file (created 0644 when missing).
func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// rootlessRun is one nsbox invocation as the user.
type rootlessRun struct {
	args      []string
	stdin     string
	env       []string          // added to the user's environment
	whileRuns func(*os.Process) // called once nsbox started
}

// run starts nsbox as the user with an environment of its own (no
// NSBOX_* of the suite's but the roots directory, which it uses
// read-only) and decodes the result of a `run --json`.
func (u *rootlessUser) run(t *testing.T, r rootlessRun) *outcome {
	t.Helper()
	args := r.args
	if !containsArg(args, "--server") { // a served policy is named as served
		args = scaleBuiltinPolicy(t, args)
	}
	cmd := exec.Command(nsboxBin, args...)
	for _, a := range args {
		exposeTo(t, a, u) // a scaled policy copy
	}
	cmd.Env = append([]string{"HOME=" + u.home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, r.env...)
	if d := os.Getenv("NSBOX_ROOTS_DIR"); d != "" {
		cmd.Env = append(cmd.Env, "NSBOX_ROOTS_DIR="+d)
	}
	cmd.Dir = u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
	u.delegate(t, cmd)
	cmd.Stdin = strings.NewReader(r.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nsbox as %s: %v", rootlessUserName, err)
	}
	if r.whileRuns != nil {
		r.whileRuns(cmd.Process)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait nsbox: %v", err)
	}
	o := &outcome{stdout: stdout.Bytes(), stderr: stderr.Bytes(), elapsed: time.Since(start), exit: cmd.ProcessState.ExitCode(),
		state: filepath.Join(u.home, ".local/state/nsbox")}
	if len(r.args) > 0 && r.args[0] == "run" && containsArg(r.args, "--json") {
		var res result.Result
		dec := json.NewDecoder(bytes.NewReader(o.stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("nsbox --json printed no valid result: %v\nstdout: %s\nstderr: %s", err, o.stdout, o.stderr)
		}
		o.res = &res
	}
	return o
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// rootlessPolicy is a policy a rootless run can get on a host without a
// delegated cgroup: default, without cgroups among its requirements.
func rootlessPolicy(t *testing.T, u *rootlessUser) string {
	t.Helper()
	p := filepath.Join(u.home, "rootless.toml")
	text := "extends = \"default\"\n\n[sandbox]\nrequire = [\"namespaces\", \"seccomp\", \"memfd_noexec\"]\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// delegatedCgroup reports whether the rootless tests run the user's nsbox
// in a cgroup delegated to it: on a cgroup v2 host (make test-v2's
// guest), each nsbox the user starts is born in a subtree of its own that
// the test delegates as systemd's Delegate=yes does (delegate). On v1
// nothing can be delegated: rootless runs have no cgroup.
func delegatedCgroup() bool {
	info, err := cgroup.Detect()
	return err == nil && info.Version == 2
}

// delegate makes, on a cgroup v2 host, a cgroup owned by the user (the
// directory, cgroup.procs, cgroup.subtree_control, cgroup.threads, as
// systemd's Delegate=yes) with cpu, memory and pids available, and has
// cmd start in it (CLONE_INTO_CGROUP). It is removed after the test.
func (u *rootlessUser) delegate(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if !delegatedCgroup() {
		return
	}
	const root = "/sys/fs/cgroup"
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0); err != nil {
		t.Fatalf("enable controllers at the root: %v", err)
	}
	dir, err := os.MkdirTemp(root, "nsbox-test-delegated-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupTree(t, dir) })
	for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
		if err := os.Chown(filepath.Join(dir, f), u.uid, u.gid); err != nil {
			t.Fatalf("delegate %s: %v", dir, err)
		}
	}
	fd, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(fd.Fd())
}

// removeCgroupTree removes a cgroup and its descendants, deepest first;
// one that still holds a process fails the test.
func removeCgroupTree(t *testing.T, dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		var err error
		for end := time.Now().Add(scaled(5 * time.Second)); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if err = os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove the delegated cgroup %s: %v", dirs[i], err)
		}
	}
}

// TestRootlessRun runs a program as the unprivileged user in both of
// rootless mode's id setups and checks, from the host, whose uid the
// program had: one of the user's subordinate ids, never the user's own,
// when a range is mapped; the user's own when it is not. The run is
// confined as a root run is (every namespace, seccomp, no capability),
// its files are under the user's XDG directories, and nothing is left.
func TestRootlessRun(t *testing.T) {
	u := newRootlessUser(t)
	mustHave(t, "newuidmap")
	pol := rootlessPolicy(t, u)
	for _, tc := range []struct {
		name, ids, hostIDs string
		wantUID            func(uid int) bool
	}{
		{"subordinate", "auto", result.HostIDsOwn, func(uid int) bool {
			return uid >= rootlessSubStart && uid < rootlessSubStart+rootlessSubCount
		}},
		{"single", "single", result.HostIDsShared, func(uid int) bool { return uid == u.uid }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := `import os, time
print(os.getuid(), os.getgid())
st = open("/proc/self/status").read()
print([l for l in st.splitlines() if l.startswith(("CapEff", "CapBnd", "NoNewPrivs", "Seccomp:"))])
open("/workspace/started", "w").close()
time.sleep(3)
`
			var hostUID = -1
			var reaperExe string
			o := u.run(t, rootlessRun{
				args: []string{"run", "--json", "--policy", pol, "-c", code},
				env:  []string{"NSBOX_USERNS_IDS=" + tc.ids},
				whileRuns: func(p *os.Process) {
					hostUID = programHostUID(t, p.Pid)
					reaperExe = reaperOf(p.Pid)
				},
			})
			o.wantStatus(t, result.StatusOK)
			if got := strings.Fields(o.res.Stdout); len(got) < 2 || got[0] != "1000" || got[1] != "1000" {
				t.Errorf("inside: uid/gid %q, want 1000 1000", o.res.Stdout)
			}
			for _, want := range []string{"'CapEff:\\t0000000000000000'", "'CapBnd:\\t0000000000000000'", "'NoNewPrivs:\\t1'", "'Seccomp:\\t2'"} {
				if !strings.Contains(o.res.Stdout, want) {
					t.Errorf("inside: %s missing from %s", want, o.res.Stdout)
				}
			}
			if !tc.wantUID(hostUID) {
				t.Errorf("the program ran as host uid %d (user %s is %d; subordinate ids %d+%d)", hostUID, rootlessUserName, u.uid, rootlessSubStart, rootlessSubCount)
			}
			// The stand-alone init root installed beside nsbox is used:
			// checked on the host by the user's nsbox and handed down, as
			// inside its namespace root's files look unowned.
			if init := filepath.Join(filepath.Dir(nsboxBin), "nsbox-init"); fileOwnedByRoot(init) && reaperExe != init {
				t.Errorf("the run's reaper is %q, want the stand-alone %s", reaperExe, init)
			}
			sb := o.res.Sandbox
			if sb == nil || !sb.Rootless || sb.HostIDs != tc.hostIDs || len(sb.Namespaces) != 7 || sb.Seccomp != "default+noproc" {
				t.Errorf("sandbox %+v, want rootless, host_ids %s, seven namespaces, seccomp default+noproc", sb, tc.hostIDs)
			}
			if !delegatedCgroup() && (sb == nil || sb.Cgroup != result.CgroupNone) {
				t.Errorf("sandbox.cgroup %v without a delegated cgroup, want none", sb)
			}
			// The user's own state: the run's directory is gone, its row is
			// in the user's audit log.
			o.noLeftovers(t)
			if _, err := os.Stat(filepath.Join(u.home, ".local/state/nsbox/audit.db")); err != nil {
				t.Errorf("no audit log in the user's XDG state directory: %v", err)
			}
			waitNoProcessesOf(t, tc.wantUID)
		})
	}
}

// programHostUID waits (bounded) for the sandboxed program below nsbox's
// pid to create its marker, and returns the host uid of the python
// process among nsbox's descendants.
func programHostUID(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(scaled(20 * time.Second))
	for time.Now().Before(deadline) {
		for _, p := range descendants(pid) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
			if err != nil || !strings.Contains(string(b), "Name:\tpython") {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
					n, _ := strconv.Atoi(f[1])
					return n
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("no python process below nsbox (pid %d) within the wait", pid)
	return -1
}

// waitNoProcessesOf fails unless, within a short wait, no process on the
// host has a uid for which match holds.
func waitNoProcessesOf(t *testing.T, match func(uid int) bool) {
	t.Helper()
	var left []string
	for end := time.Now().Add(scaled(5 * time.Second)); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		left = processesOf(match)
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("processes left behind: %v", left)
}

// processesOf lists live processes with a real uid for which match holds.
func processesOf(match func(uid int) bool) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil || strings.Contains(string(b), "\nState:\tZ") {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
				if n, err := strconv.Atoi(f[1]); err == nil && match(n) {
					out = append(out, d.Name())
				}
			}
		}
	}
	return out
}

// TestRootlessRequiredCgroupFailsClosed: without a delegated cgroup v2
// subtree (always on a cgroup v1 host), a policy that requires cgroup
// limits refuses to run, names the fix, and records the refusal in the
// user's own audit log, which `nsbox audit` reads as that user.
func TestRootlessRequiredCgroupFailsClosed(t *testing.T) {
	if delegatedCgroup() {
		t.Skip("this host delegates a cgroup to the test user: TestRootlessCgroupLimits covers it")
	}
	u := newRootlessUser(t)
	o := u.run(t, rootlessRun{args: []string{"run", "--json", "--policy", "default", "-c", "print('never')"}})
	o.wantStatus(t, result.StatusSandboxError)
	if o.exit != result.ExitSandboxError {
		t.Errorf("exit %d, want %d", o.exit, result.ExitSandboxError)
	}
	if e := o.res.Error; e == nil || e.Step != "requirements" || !strings.Contains(e.Message, "cgroups") || !strings.Contains(e.Message, "Delegate=yes") {
		t.Errorf("error %+v: want the requirements step, naming cgroups and the delegation fix", o.res.Error)
	}
	if strings.Contains(o.res.Stdout, "never") {
		t.Error("the program ran")
	}
	a := u.run(t, rootlessRun{args: []string{"audit", "list", "--json"}})
	if a.exit != 0 || !strings.Contains(string(a.stdout), o.res.ID) {
		t.Errorf("nsbox audit list as the user (exit %d) does not show run %s: %s %s", a.exit, o.res.ID, a.stdout, a.stderr)
	}
}

// TestRootlessFirstRunBuildsBase: in an empty roots directory of the
// user's, the first rootless run builds the base root (as `nsbox rootfs
// build` would, in nsbox's user namespace), owned by the user, and runs
// on it.
func TestRootlessFirstRunBuildsBase(t *testing.T) {
	u := newRootlessUser(t)
	dir := filepath.Join(u.home, "roots")
	t.Setenv("NSBOX_ROOTS_DIR", dir) // u.run passes it on
	o := u.run(t, rootlessRun{args: []string{"run", "--json", "--policy", rootlessPolicy(t, u), "-c", "import sys; print(sys.prefix)"}})
	o.wantStatus(t, result.StatusOK)
	st, err := os.Stat(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatalf("no base root in the user's XDG data directory: %v", err)
	}
	if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != u.uid {
		t.Errorf("base root owned by uid %d, want the user's %d", sys.Uid, u.uid)
	}
}

// TestRootlessDoctor: doctor as the user probes from nsbox's user
// namespace and reports the mode's own rows.
func TestRootlessDoctor(t *testing.T) {
	u := newRootlessUser(t)
	o := u.run(t, rootlessRun{args: []string{"doctor", "--policy", rootlessPolicy(t, u)}})
	out := string(o.stdout)
	if o.exit != 0 {
		t.Fatalf("doctor as the user: exit %d\n%s%s", o.exit, out, o.stderr)
	}
	for _, want := range []string{"rootless user namespace", "run ids", "own per run", u.home + "/.local/state/nsbox"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, out)
		}
	}
	if !delegatedCgroup() && !strings.Contains(out, "Delegate=yes") {
		t.Errorf("doctor does not say how to get cgroup limits rootless:\n%s", out)
	}
}

// TestRootlessKilledSupervisor: SIGKILL to the user's nsbox (the process
// the user started, outside nsbox's namespace) ends the sandbox: nothing
// of the run's ids is left.
func TestRootlessKilledSupervisor(t *testing.T) {
	u := newRootlessUser(t)
	inRange := func(uid int) bool { return uid >= rootlessSubStart && uid < rootlessSubStart+rootlessSubCount }
	// Neither the sandbox nor the nsbox that ran in nsbox's namespace
	// (the user's uid there) outlives the nsbox the user started, and
	// they go at once: the program would sleep for 30 s.
	gone := func(uid int) bool { return inRange(uid) || uid == u.uid }
	o := u.run(t, rootlessRun{
		args: []string{"run", "--policy", "permissive", "-c", // forks, which default's Python layer refuses
			"import os, time\nfor _ in range(3):\n    os.fork() == 0 and time.sleep(30)\ntime.sleep(30)"},
		whileRuns: func(p *os.Process) {
			if uid := programHostUID(t, p.Pid); !inRange(uid) {
				t.Errorf("program host uid %d", uid)
			}
			if err := p.Signal(syscall.SIGKILL); err != nil {
				t.Errorf("kill nsbox: %v", err)
			}
			waitNoProcessesOf(t, gone)
		},
	})
	if o.exit != -1 {
		t.Errorf("exit %d after SIGKILL, want -1 (killed)", o.exit)
	}
}

// TestRootlessServe: the service runs as the user too (nsbox serve
// checks nsbox-serve on the host, which enters nsbox's namespace), with a
// warm pool, and `nsbox run --server` as the user gets the same result
// schema from it.
func TestRootlessServe(t *testing.T) {
	u := newRootlessUser(t)
	sock := filepath.Join(u.home, "serve.sock")
	serve := exec.Command(nsboxBin, "serve", "--listen", "unix:"+sock, "--policies", "permissive", "--pool", "1")
	serve.Env = []string{"HOME=" + u.home, "PATH=/usr/local/bin:/usr/bin:/bin"}
	if d := os.Getenv("NSBOX_ROOTS_DIR"); d != "" {
		serve.Env = append(serve.Env, "NSBOX_ROOTS_DIR="+d)
	}
	serve.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
	u.delegate(t, serve)
	var log bytes.Buffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			serve.Process.Kill()
			serve.Wait()
		}
	}()
	if !waitFile(sock, scaled(20*time.Second)) {
		t.Fatalf("the service made no socket: %s", log.String())
	}
	o := u.run(t, rootlessRun{args: []string{"run", "--server", "unix:" + sock, "--json", "--policy", "permissive", "-c", "import os; print(os.getuid())"}})
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "1000\n" || o.res.Sandbox == nil || !o.res.Sandbox.Rootless {
		t.Errorf("stdout %q, sandbox %+v: want 1000 and a rootless sandbox", o.res.Stdout, o.res.Sandbox)
	}
	serve.Process.Signal(syscall.SIGTERM)
	err := serve.Wait()
	stopped = true
	if err != nil {
		t.Errorf("nsbox serve as the user: %v\n%s", err, log.String())
	}
	waitNoProcessesOf(t, func(uid int) bool {
		return uid == u.uid || uid >= rootlessSubStart && uid < rootlessSubStart+rootlessSubCount
	})
}

// TestRootlessCgroupLimits: in a cgroup delegated to the user (cgroup v2
// only: make test-v2's guest), a rootless run gets its own cgroup below
// it, with the policy's limits enforced: a memory bomb ends as
// memory_limit, a fork loop stops at pids.max.
func TestRootlessCgroupLimits(t *testing.T) {
	if !delegatedCgroup() {
		t.Skip("cgroup v1: nothing can be delegated to an ordinary user (TestRootlessRequiredCgroupFailsClosed); make test-v2 runs this")
	}
	u := newRootlessUser(t)
	o := u.run(t, rootlessRun{args: []string{"run", "--json", "--policy", "default", "-c",
		"chunks = []\nfor _ in range(64):\n    chunks.append(bytearray(64 << 20))\nprint('not stopped')"}})
	o.wantStatus(t, result.StatusMemoryLimit)
	if sb := o.res.Sandbox; sb == nil || sb.Cgroup != result.CgroupV2 || !sb.Rootless {
		t.Errorf("sandbox %+v: want a rootless run in a v2 cgroup", sb)
	}
	o = u.run(t, rootlessRun{args: []string{"run", "--json", "--policy", "permissive", "-c", `import os, time
n = 0
for _ in range(400):
    try:
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
    except OSError:
        break
print(n)
`}})
	o.wantStatus(t, result.StatusOK)
	forks, err := strconv.Atoi(strings.TrimSpace(o.res.Stdout))
	if err != nil || o.res.Limits == nil || o.res.Limits.Pids == nil || forks >= int(*o.res.Limits.Pids) {
		t.Errorf("%q forks with limits %+v: want fewer than pids.max", o.res.Stdout, o.res.Limits)
	}
}

// reaperOf returns the executable of the reaper (the python program's
// parent) below nsbox's pid, "" when none is found.
func reaperOf(pid int) string {
	for _, p := range descendants(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil || !strings.Contains(string(b), "Name:\tpython") {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "PPid:" {
				exe, _ := os.Readlink("/proc/" + f[1] + "/exe")
				return exe
			}
		}
	}
	return ""
}

// fileOwnedByRoot reports whether path is a regular file owned by root.
func fileOwnedByRoot(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Sys().(*syscall.Stat_t).Uid == 0
}
