package initproc

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// attachCgroup moves the calling thread into the run's cgroup in every v1
// hierarchy: it writes "0" (the writer itself) to each tasks file the
// supervisor opened, then closes them. It must run on the locked thread
// that later calls execve: execve keeps that thread's cgroups, and every
// other thread of the init dies in it, never having been moved.
//
// Writing "0" moves one thread and lets the kernel skip the global
// cgroup_threadgroup_rwsem (Linux 5.18+), which a cgroup.procs write of the
// whole init takes, waiting for an RCU grace period (cgroup.OpenTasks). The
// write is allowed because cgroup v1 checks the credentials the file was
// opened with (host root's), not the init's.
func attachCgroup(tasks []spec.TasksFile) error {
	for _, t := range tasks {
		if err := attachTasks(t); err != nil {
			return err
		}
	}
	return nil
}

// attachTasks writes "0" to one tasks file and closes it.
func attachTasks(t spec.TasksFile) error {
	// A misnumbered descriptor (a mount, the report pipe) could swallow
	// the "0" and pass for an attach: only a cgroup v1 file opened
	// write-only will do. (The Go runtime keeps cgroup files of its own
	// open, read-only, for GOMAXPROCS.)
	var st unix.Statfs_t
	if err := unix.Fstatfs(t.FD, &st); err != nil {
		return fmt.Errorf("fstatfs %s (fd %d): %w", t.Path, t.FD, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC {
		return fmt.Errorf("%s (fd %d): not on a cgroup v1 filesystem (f_type %#x)", t.Path, t.FD, st.Type)
	}
	fl, err := unix.FcntlInt(uintptr(t.FD), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Errorf("fcntl(%d, F_GETFL) of %s: %w", t.FD, t.Path, err)
	}
	if fl&unix.O_ACCMODE != unix.O_WRONLY {
		return fmt.Errorf("%s (fd %d): not opened write-only (flags %#x)", t.Path, t.FD, fl)
	}
	if _, err := unix.Write(t.FD, []byte("0")); err != nil {
		return fmt.Errorf("write 0 to %s (fd %d): %w", t.Path, t.FD, err)
	}
	// It holds host root's credentials: nothing may keep it.
	if err := unix.Close(t.FD); err != nil {
		return fmt.Errorf("close %s (fd %d): %w", t.Path, t.FD, err)
	}
	return nil
}
