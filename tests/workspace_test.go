package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// TestIdmappedWorkspace: a --workspace directory of a regular user is
// idmapped, with no chown: inside, the program owns it; what it creates
// appears on the host owned by the directory's owner and group; a file
// of another owner (root) stays out of its reach.
func TestIdmappedWorkspace(t *testing.T) {
	needRoot(t)
	const uid, gid = 4321, 4322
	ws := filepath.Join(t.TempDir(), "ws")
	for _, step := range []error{
		os.Mkdir(ws, 0o750), os.Chown(ws, uid, gid),
		os.WriteFile(filepath.Join(ws, "mine"), []byte("old"), 0o644), os.Chown(filepath.Join(ws, "mine"), uid, gid),
		os.WriteFile(filepath.Join(ws, "rootfile"), []byte("canary"), 0o644),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	code := `
import os
st = os.stat("/workspace")
print("WS", st.st_uid, st.st_gid, oct(st.st_mode & 0o777))
open("/workspace/new.txt", "w").write("x")
os.mkdir("/workspace/sub")
open("/workspace/sub/deep", "w").write("y")
open("/workspace/mine", "w").write("new")
st = os.stat("/workspace/rootfile")
print("ROOTFILE", st.st_uid, st.st_gid)
try:
    open("/workspace/rootfile", "w").write("overwritten")
    print("ROOTFILE WRITTEN")
except PermissionError:
    print("ROOTFILE REFUSED")
`
	o := runPy(t, "default", code, "--workspace", ws)
	o.wantStatus(t, result.StatusOK)
	for _, want := range []string{"WS 1000 1000 0o750", "ROOTFILE 65534 65534", "ROOTFILE REFUSED"} {
		if !strings.Contains(o.res.Stdout, want) {
			t.Errorf("want %q in:\n%s", want, o.res.Stdout)
		}
	}
	for _, name := range []string{"new.txt", "sub", "sub/deep", "mine"} {
		fi, err := os.Lstat(filepath.Join(ws, name))
		if err != nil {
			t.Errorf("host: %s: %v", name, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("host: %s owned by %d:%d, want the workspace's owner %d:%d", name, st.Uid, st.Gid, uid, gid)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "mine")); string(b) != "new" {
		t.Errorf("host: mine holds %q, want the program's write", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "rootfile")); string(b) != "canary" {
		t.Errorf("host: root's file holds %q", b)
	}
}

// TestWorkspaceNotRoots: a root-owned directory is never idmapped. One
// only root can write is refused up front, with a reason and no advice to
// chown anything; one writable by all (like /tmp) is used as before, and
// the program's files are its own host uid's.
func TestWorkspaceNotRoots(t *testing.T) {
	needRoot(t)
	for _, dir := range []string{t.TempDir(), "/", "/etc"} {
		os.Chmod(dir, 0o755|os.ModeDir) // t.TempDir's; / and /etc are 0755 already
		o := nsbox(t, run{args: []string{"run", "--json", "--workspace", dir, "-c", "pass"}})
		o.wantStatus(t, result.StatusSandboxError)
		msg := fmt.Sprint(o.res.Error)
		if o.res.Error == nil || o.res.Error.Step != "workspace" || !strings.Contains(msg, "owned by root") || !strings.Contains(msg, dir) {
			t.Errorf("--workspace %s: error %s, want step workspace naming it and saying it is root's", dir, msg)
		}
		if strings.Contains(msg, "chown") || strings.Contains(msg, "chmod") {
			t.Errorf("--workspace %s: the error advises changing it: %s", dir, msg)
		}
	}

	open := t.TempDir()
	os.Chmod(open, 0o1777|os.ModeDir|os.ModeSticky)
	o := runPy(t, "default", `open("/workspace/f", "w").write("x")`, "--workspace", open)
	o.wantStatus(t, result.StatusOK)
	fi, err := os.Stat(filepath.Join(open, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !isProgramID(st.Uid) || st.Gid != st.Uid {
		t.Errorf("file in a world-writable root-owned workspace owned by %d:%d, want a program id of %s", st.Uid, st.Gid, suiteIDs)
	}
}

// TestCrashedSupervisorSlotNotReused: a supervisor that died leaves its
// id slot's lock free but marked; the slot is not handed out while a
// process with its ids lives, and is once none does. The range has one
// slot, the last of the suite's, so the next run has no other choice.
//
// On cgroup v1 the crash is real: the sandbox is frozen (a frozen task
// does not act on the SIGKILL its supervisor's death sends) while nsbox
// is SIGKILLed. Elsewhere a crashed supervisor's leftovers are made by
// hand: a marked lock file and a process of the slot's program uid.
func TestCrashedSupervisorSlotNotReused(t *testing.T) {
	needRoot(t)
	slot := supervisor.IDRange{Base: suiteIDs.Base + suiteIDs.Count - supervisor.IDsPerRun, Count: supervisor.IDsPerRun}
	env := []string{"NSBOX_ID_RANGE=" + slot.String()}
	state := t.TempDir()
	var thaw func()
	if _, err := os.Stat("/sys/fs/cgroup/freezer"); err == nil {
		ws := sandboxWorkspace(t)
		nsbox(t, run{
			args:  []string{"run", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", `open("/workspace/ready", "w").close(); import time; time.sleep(30)`},
			env:   env,
			state: state,
			whileRuns: func(p *os.Process) {
				if !waitFile(filepath.Join(ws, "ready"), 10*time.Second) {
					t.Errorf("payload never got ready")
				}
				thaw = freeze(t, p.Pid)
				p.Signal(syscall.SIGKILL)
			},
		})
	} else {
		lock := filepath.Join(supervisor.IDLockDir, fmt.Sprint(slot.Base))
		if err := os.MkdirAll(supervisor.IDLockDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lock, []byte("run crashed\nsupervisor 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		sleeper := exec.Command("sleep", "30")
		sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: slot.Base + 1, Gid: slot.Base + 1}}
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		thaw = func() { sleeper.Process.Kill(); sleeper.Wait() }
	}
	defer func() {
		if thaw != nil {
			thaw()
		}
	}()
	if t.Failed() || thaw == nil {
		t.FailNow()
	}
	if len(sandboxProcesses(t)) == 0 {
		t.Fatal("the crashed run left no process: nothing to test")
	}

	o := nsbox(t, run{args: []string{"run", "--json", "-c", "pass"}, env: env, state: state})
	o.wantStatus(t, result.StatusSandboxError)
	if e := o.res.Error; e == nil || e.Step != "ids" || !strings.Contains(e.Message, "crashed nsbox left, first uid "+fmt.Sprint(slot.Base)) {
		t.Errorf("error %+v, want step ids: the only slot is held by a crashed run's processes", e)
	}

	// Thawed, the sandbox dies of its SIGKILL; nsbox counts a zombie
	// too until the host's init reaps it.
	thaw()
	thaw = nil
	deadline := time.Now().Add(5 * time.Second)
	for hasUID(slot.Base, slot.Base+1) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	o = nsbox(t, run{args: []string{"run", "--json", "-c", "pass"}, env: env, state: state})
	o.wantStatus(t, result.StatusOK)
}

// freeze freezes the v1 freezer cgroup of nsbox's child (the sandbox)
// and returns how to thaw it.
func freeze(t *testing.T, nsboxPid int) (thaw func()) {
	t.Helper()
	kids := programOf(t, nsboxPid)
	if len(kids) == 0 {
		t.Fatal("nsbox has no sandboxed program")
	}
	b, err := os.ReadFile(filepath.Join("/proc", kids[0], "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	var dir string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "freezer" {
			dir = filepath.Join("/sys/fs/cgroup/freezer", f[2])
		}
	}
	if dir == "" || !strings.Contains(dir, "/nsbox/") {
		t.Fatalf("sandbox not in a run's freezer cgroup: %s", b)
	}
	set := func(state string) {
		if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(state), 0); err != nil {
			t.Errorf("%s %s: %v", state, dir, err)
		}
	}
	set("FROZEN")
	return func() { set("THAWED") }
}

// hasUID reports whether a process, zombies included, has a uid among
// ids.
func hasUID(ids ...uint32) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" {
				for _, id := range ids {
					if slices.Contains(f[1:], fmt.Sprint(id)) {
						return true
					}
				}
			}
		}
	}
	return false
}
