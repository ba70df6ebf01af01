package cgroup

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenTasks opens the v1 `tasks` file of each of the cgroup's directories
// (one per hierarchy, sorted, co-mounted ones once) for writing, so that a
// process can attach its own thread: the init writes "0" to each.
//
// Why not Add: writing a pid to cgroup.procs moves a whole thread group
// and takes the global cgroup_threadgroup_rwsem for writing, which waits
// for an RCU grace period, long while the init's Go runtime keeps the CPUs
// busy. A task writing "0" to `tasks` moves only itself, and the kernel
// (cgroup_procs_write_start, Linux 5.18+) skips that lock.
//
// Why it works from inside a user namespace: cgroup v1 checks the
// credentials the file was opened with (of->file->f_cred, since the fix
// for CVE-2021-4197), not the writer's, so files opened here by host root
// let the unprivileged init attach itself and nothing else it could name.
//
// The files are close-on-exec in this process; the caller hands them to
// the init and closes its copies. Only v1 has `tasks`: on v2 use FD.
func (c *Cgroup) OpenTasks() ([]*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil, fmt.Errorf("cgroup: open tasks of %s: cgroup destroyed", c.rel)
	}
	if c.h.version != 1 {
		return nil, fmt.Errorf("cgroup: open tasks of %s: cgroup v%d has no tasks file (use FD)", c.rel, c.h.version)
	}
	var files []*os.File
	for _, dir := range c.dirs() {
		f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("cgroup: %w", err) // *PathError: "open <dir>/tasks: ..."
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("cgroup: open tasks of %s: no directories", c.rel)
	}
	return files, nil
}
