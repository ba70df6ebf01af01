package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestUnprivilegedIdentity checks the program's credentials from inside
// (uid, groups, every capability set, no_new_privs) and from the host (a
// file it creates in the idmapped workspace is owned by the directory's
// owner, never root).
func TestUnprivilegedIdentity(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	code := `
import os
print("IDS", os.getresuid(), os.getresgid(), os.getgroups())
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]:
    print(k, st.get(k, "?").strip())
open("/workspace/owned", "w").write("x")
`
	o := nsbox(t, run{args: []string{"run", "--json", "--workspace", ws, "-c", code}})
	o.wantStatus(t, result.StatusOK)
	for _, want := range []string{
		"IDS (1000, 1000, 1000) (1000, 1000, 1000) []",
		"CapInh 0000000000000000", "CapPrm 0000000000000000", "CapEff 0000000000000000",
		"CapBnd 0000000000000000", "CapAmb 0000000000000000", "NoNewPrivs 1",
	} {
		if !strings.Contains(o.res.Stdout, want) {
			t.Errorf("want %q in:\n%s", want, o.res.Stdout)
		}
	}
	fi, err := os.Stat(filepath.Join(ws, "owned"))
	if err != nil {
		t.Fatalf("host: file written in /workspace: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid == 0 || st.Gid == 0 || st.Uid != wsOwnerUID || st.Gid != wsOwnerUID {
		t.Errorf("host: file owned by %d:%d, want the workspace's owner %d (never root)", st.Uid, st.Gid, wsOwnerUID)
	}
}

// TestProgramUIDFromHost looks at the running program from the host: its
// /proc status shows one unprivileged host uid of the run's own in every
// slot, and its user namespace is owned by the run's init id (not host
// root, whose per-user quotas it would otherwise spend).
func TestProgramUIDFromHost(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	code := `
import time
open("/workspace/started", "w").close()
time.sleep(3)
`
	var uids []string
	var owner uint32
	var uidMap string
	o := nsbox(t, run{
		args: []string{"run", "--json", "--workspace", ws, "-c", code},
		whileRuns: func(p *os.Process) {
			if !waitFile(filepath.Join(ws, "started"), 5e9) {
				t.Errorf("program did not start")
				return
			}
			for _, c := range programOf(t, p.Pid) {
				b, err := os.ReadFile(filepath.Join("/proc", c, "status"))
				if err != nil {
					continue
				}
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "Uid:") {
						uids = append(uids, l)
					}
				}
				owner = usernsOwner(t, c)
				m, _ := os.ReadFile(filepath.Join("/proc", c, "uid_map"))
				uidMap = strings.Join(strings.Fields(string(m)), " ")
			}
		},
	})
	o.wantStatus(t, result.StatusOK)
	if len(uids) == 0 {
		t.Fatalf("found no sandbox process under nsbox")
	}
	for _, l := range uids {
		f := strings.Fields(l)
		n, _ := strconv.ParseUint(f[1], 10, 32)
		if len(f) != 5 || !isProgramID(uint32(n)) || f[2] != f[1] || f[3] != f[1] || f[4] != f[1] {
			t.Errorf("program uid line from host %q: want one program id of range %s everywhere", l, suiteIDs)
		}
		if owner != uint32(n)-1 {
			t.Errorf("user namespace owned by host uid %d, want the run's init id %d", owner, n-1)
		}
		// As the host sees it: inside 0 and 1000 are the run's pair, and
		// nothing else (host root least of all) is mapped.
		if want := fmt.Sprintf("0 %d 1 1000 %d 1", n-1, n); uidMap != want {
			t.Errorf("uid_map %q, want %q", uidMap, want)
		}
	}
}

// usernsOwner returns the host uid owning pid's user namespace
// (NS_GET_OWNER_UID).
func usernsOwner(t *testing.T, pid string) uint32 {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", pid, "ns", "user"))
	if err != nil {
		t.Fatalf("open user namespace of %s: %v", pid, err)
	}
	defer f.Close()
	var uid uint32
	const nsGetOwnerUID = 0xb704 // _IO(0xb7, 0x4)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 {
		t.Fatalf("NS_GET_OWNER_UID of %s: %v", pid, e)
	}
	return uid
}

// programOf lists the sandboxed programs of nsbox process nsboxPid: the
// children of its children, the reapers (PID 1 of each sandbox).
func programOf(t *testing.T, nsboxPid int) []string {
	t.Helper()
	var out []string
	for _, reaper := range childrenOf(t, nsboxPid) {
		pid, err := strconv.Atoi(reaper)
		if err != nil {
			continue
		}
		out = append(out, childrenOf(t, pid)...)
	}
	return out
}

// childrenOf lists the children of pid, forked by any of its threads.
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("list tasks of %d: %v", pid, err)
	}
	var kids []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}
