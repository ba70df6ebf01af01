package build

import (
	"os/exec"
	"syscall"
)

// command prepares a program the build runs (the interpreter, pip,
// compileall, the loader). Each starts as PID 1 of a new PID namespace and
// dies with the build: a SIGKILLed `nsbox rootfs build` takes its whole
// tree with it (compileall's worker processes included), instead of
// leaving workers writing into a directory the next build must remove.
// PDEATHSIG kills the namespace's first process when nsbox dies; the
// kernel then kills every other process in the namespace.
func (b *builder) command(name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(b.ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd
}
