package hostcheck

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const procSubsetName = "proc subset=pid"

// probeProcSubset mounts a procfs with subset=pid (Linux 5.8) in a child
// in new user, mount and PID namespaces, where a run mounts its /proc.
// With the option /proc shows processes only, nothing of the host kernel.
// Informational: a run's /proc does not depend on it.
func probeProcSubset(exe string) Check {
	c := Check{Name: procSubsetName, MinKernel: "5.8"}
	err := procSubsetRoundTrip(exe)
	switch {
	case err == nil:
		c.OK, c.Detail = true, "mounted in new user+mount+pid namespaces: processes only"
	case errors.Is(err, unix.EINVAL):
		c.Detail, c.Hint = err.Error(), "the kernel is older than 5.8; /proc stays usable, with runc's masked and read-only paths"
	case errors.Is(err, unix.EPERM):
		// The kernel refuses a new procfs in a user namespace while the
		// existing /proc is partly hidden (mnt_too_revealing): a run's
		// /proc fails the same way.
		c.Detail, c.Hint = err.Error(), "no procfs can be mounted in a user namespace here, which nsbox run needs too: "+
			"in a container /proc must not have paths masked by the runtime (Docker: --security-opt systempaths=unconfined "+
			"or --privileged)"
	default:
		c.Detail = err.Error()
	}
	return c
}

func procSubsetRoundTrip(exe string) error {
	dir, err := os.MkdirTemp("", "nsbox-doctor-proc-")
	if err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	defer os.Remove(dir)
	_, err = child{exe: exe, args: []string{"proc-subset", dir},
		flags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID}.run()
	return err
}
