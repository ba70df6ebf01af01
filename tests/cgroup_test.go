package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// v1Hierarchies are the cgroup v1 hierarchies a run's cgroup lives in.
var v1Hierarchies = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// TestProgramInRunCgroup reads, from the host, the cgroups of every
// thread of every process of a running sandbox: the program (the setup
// init after execve), a thread it started and a child it forked (and on
// v2 the reaper, PID 1) must all be
// in the run's own cgroup (nsbox/<prefix>-<run id>) in every v1
// hierarchy (on v2, the unified one). On v1 the init attaches the thread
// that execs the program itself; this is the end-to-end proof that it
// worked, and that execve kept it there.
func TestProgramInRunCgroup(t *testing.T) {
	needRoot(t)
	ws := sandboxWorkspace(t)
	code := `
import os, threading, time
pid = os.fork()
if pid == 0:
    while not os.path.exists("/workspace/done"):
        time.sleep(0.02)
    os._exit(0)
threading.Thread(target=time.sleep, args=(10,), daemon=True).start()
open("/workspace/started", "w").close()
for _ in range(500):
    if os.path.exists("/workspace/done"):
        break
    time.sleep(0.02)
os.waitpid(pid, 0)
print("done")
`
	seen := map[string][]string{} // "pid/tid" -> cgroup lines
	o := nsbox(t, run{
		args: []string{"run", "--json", "--policy", osOnly(t, "default"), "--workspace", ws, "-c", code},
		whileRuns: func(p *os.Process) {
			defer os.WriteFile(filepath.Join(ws, "done"), nil, 0o644)
			if !waitFile(filepath.Join(ws, "started"), 10*time.Second) {
				t.Errorf("program did not start")
				return
			}
			// The reaper (nsbox's child) is cloned into the run's cgroup
			// on v2; on v1 it stays in nsbox's, and only the setup init
			// attaches itself and so the program.
			pids := descendants(p.Pid)
			if !unifiedCgroup() && len(pids) > 0 {
				pids = pids[1:]
			}
			for _, pid := range pids {
				tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*"))
				for _, task := range tasks {
					b, err := os.ReadFile(filepath.Join(task, "cgroup"))
					if err != nil {
						continue // exited meanwhile
					}
					seen[strings.TrimPrefix(task, "/proc/")] = strings.Split(strings.TrimSpace(string(b)), "\n")
				}
			}
		},
	})
	o.wantStatus(t, result.StatusOK)
	if o.res.Stdout != "done\n" {
		t.Errorf("stdout %q", o.res.Stdout)
	}
	// The program, its thread and its child: at least three tasks.
	if len(seen) < 3 {
		t.Fatalf("found %d sandbox tasks (%v), want the program, its thread and its child", len(seen), seen)
	}
	for task, lines := range seen {
		paths := cgroupPaths(lines)
		want := v1Hierarchies
		if _, v1 := paths["memory"]; !v1 {
			want = []string{""} // v2: "0::/nsbox/..."
		}
		for _, h := range want {
			if p := paths[h]; !strings.HasPrefix(p, "/nsbox/s") || !strings.HasSuffix(p, "-"+o.res.ID) {
				t.Errorf("task %s is in %q in hierarchy %q, want /nsbox/s<prefix>-%s\n%s", task, p, h, o.res.ID, strings.Join(lines, "\n"))
			}
		}
	}
	t.Logf("%d tasks checked, all in nsbox/s<prefix>-%s", len(seen), o.res.ID)
}

// unifiedCgroup reports whether the host has cgroup v2 only.
func unifiedCgroup() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// descendants returns the pids of pid's children, theirs, and so on.
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// cgroupPaths maps each controller of /proc/PID/cgroup lines to its path;
// the v2 line ("0::path") under "".
func cgroupPaths(lines []string) map[string]string {
	m := map[string]string{}
	for _, line := range lines {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			m[c] = f[2]
		}
	}
	return m
}
