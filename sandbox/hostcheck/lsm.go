package hostcheck

import (
	"errors"
	"fmt"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/seccomp"
)

// seccompCheck asks the seccomp package, which knows what its filters
// need: seccomp(2) (Linux 3.17) and the KILL_PROCESS action (4.14).
func seccompCheck() Check {
	ok, reason := seccomp.Supported()
	c := Check{Name: "seccomp", Group: Seccomp, OK: ok, Detail: reason, MinKernel: "4.14"}
	if !ok {
		c.Hint = "the kernel needs Linux 4.14+ built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y; in Docker/Kubernetes " +
			"the container's own seccomp profile must allow seccomp(2) (or run with --security-opt seccomp=unconfined)"
	}
	return c
}

// memfdCheck reports whether a run can be kept from executing a file it
// made in memory (memfd_create, then execve, execveat, the dynamic loader
// or mmap with PROT_EXEC on /proc/self/fd/N, which the noexec mounts do
// not cover). nsbox's mechanism is seccomp: every built-in profile refuses
// memfd_create. An exec seal (MFD_NOEXEC_SEAL, vm.memfd_noexec = 2 on
// Linux 6.3+) is not used: it stops execve but not the loader's mmap.
func memfdCheck() Check {
	ok, reason := seccomp.Supported()
	c := Check{Name: "memfd noexec", Group: MemfdNoexec, OK: ok, MinKernel: "4.14"}
	if ok {
		c.Detail = "seccomp: the built-in profiles refuse memfd_create"
	} else {
		c.Detail = "needs seccomp, which is unavailable: " + reason
		c.Hint = "the kernel needs seccomp filter mode (see the seccomp check); without it a program can execute " +
			"an ELF it writes into a memfd"
	}
	return c
}

// landlockCheck reports the Landlock ABI version of the running kernel.
func landlockCheck() Check {
	c := Check{Name: "landlock", Group: Landlock, MinKernel: "5.13"}
	abi, err := landlockABI()
	if err != nil {
		c.Detail, c.Hint = err.Error(), landlockHint(err)
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("ABI %d", abi)
	return c
}

// landlockABI asks the kernel for its Landlock ABI version, the number
// the supervisor and the init also go by.
func landlockABI() (int, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("landlock_create_ruleset(VERSION): %w", err)
	}
	if abi < 1 {
		return 0, fmt.Errorf("landlock_create_ruleset(VERSION): ABI %d", abi)
	}
	return abi, nil
}

func landlockHint(err error) string {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return "the kernel has no Landlock: it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK=y"
	case errors.Is(err, unix.EOPNOTSUPP):
		return "Landlock is built in but not enabled: add landlock to the lsm= boot parameter, keeping the modules " +
			"listed in /sys/kernel/security/lsm (e.g. lsm=landlock,lockdown,yama,integrity,apparmor), or to CONFIG_LSM"
	}
	return "in Docker/Kubernetes the container's seccomp profile must allow the landlock_* syscalls"
}
