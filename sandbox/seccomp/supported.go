package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported reports whether this kernel can run the sandbox's filter, and
// why: seccomp filter mode (seccomp(2), Linux 3.17) and the actions the
// filters use (SECCOMP_GET_ACTION_AVAIL and SECCOMP_RET_KILL_PROCESS, Linux
// 4.14). For nsbox doctor and the supervisor's fail-closed check: a sandbox
// is never started without its filter. It installs nothing.
func Supported() (bool, string) {
	mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return false, "kernel built without CONFIG_SECCOMP (prctl PR_GET_SECCOMP: EINVAL)"
		}
		return false, fmt.Sprintf("prctl PR_GET_SECCOMP: %v", err)
	}
	// A NULL program: a kernel with filter mode fails to copy it, EFAULT,
	// before anything is installed.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, 0)
	switch errno {
	case unix.EFAULT:
	case unix.ENOSYS:
		return false, "no seccomp(2) system call (kernel older than 3.17, or an outer filter blocks it)"
	case unix.EINVAL:
		return false, "kernel built without CONFIG_SECCOMP_FILTER (seccomp SECCOMP_SET_MODE_FILTER: EINVAL)"
	default:
		return false, fmt.Sprintf("seccomp(SECCOMP_SET_MODE_FILTER, 0, NULL) = %v, want EFAULT", errno)
	}
	for _, a := range []struct {
		name string
		ret  uint32
	}{
		{"SECCOMP_RET_KILL_PROCESS", unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", unix.SECCOMP_RET_ALLOW},
	} {
		ret := a.ret
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&ret)))
		if errno != 0 {
			return false, fmt.Sprintf("seccomp(SECCOMP_GET_ACTION_AVAIL, %s): %v (kernel older than 4.14?)", a.name, errno)
		}
	}
	if mode == unix.SECCOMP_MODE_FILTER {
		return true, "seccomp filter mode available; this process is already filtered, the sandbox filter will stack on it"
	}
	return true, "seccomp filter mode available"
}
