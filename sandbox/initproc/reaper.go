package initproc

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// The reaper is PID 1 of the run's PID namespace, for the whole run.
//
// The program must not be PID 1 itself: the kernel treats a namespace's
// init in ways a Python program does not expect. A signal it has no
// handler for is dropped, even one it sends itself, so os.abort() falls
// through to a SIGSEGV and SIGTERM does nothing; and every orphan of the
// namespace becomes its child, so the zombies of a program that never
// waits for them (anything that double-forks) pile up until the run ends.
//
// So the reaper starts the setup init (init.go) as its child, which builds the
// sandbox and execs the program in its place. The reaper then forwards
// the signals a caller sends to PID 1, reaps every orphan, and when the
// program ends it writes the program's own wait status on its exit pipe
// (spec.Exit) and exits: the kernel then kills whatever is left in the
// namespace, as the program's own end did when it was PID 1.
//
// It holds nothing the program could use. Its descriptors are /dev/null
// and the exit pipe (a write end to the supervisor); it is not dumpable,
// and it keeps the run's init id, which the program (another id, with no
// capability) can neither signal nor ptrace. It never reads anything the
// program writes: the only input it acts on is a wait status.

// forwarded are the signals the reaper passes on to the program: those a
// caller sends to stop, interrupt or notify a process. SIGKILL and
// SIGSTOP cannot be caught; the supervisor's SIGKILL to PID 1 ends the
// whole namespace.
var forwarded = []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT}

// reaperMain runs the reaper. A failure before the setup init exists is
// reported on the sync socket like an init step; a later one on the exit
// pipe. It never returns.
func reaperMain(inv Invocation) {
	pid, err := startSetup(inv)
	if err != nil {
		ie := result.StepError("reaper", err)
		if _, werr := unix.Write(inv.SyncFD, spec.EncodeError(ie)); werr != nil {
			fmt.Fprintf(os.Stderr, "nsbox init: %v (and reporting it failed: %v)\n", ie, werr)
		}
		os.Exit(1)
	}
	os.Exit(reap(inv.StatusFD, pid))
}

// startSetup is the reaper's checklist up to the setup init's start,
// and the giving up of what the reaper does not need afterwards.
func startSetup(inv Invocation) (int, error) {
	// Refuse to run anywhere but as PID 1 of the fresh namespaces.
	if err := checkNamespaces(true); err != nil {
		return 0, err
	}
	// The exit pipe is the reaper's alone: neither the setup init nor the
	// program may write a status in the program's name.
	if _, err := unix.FcntlInt(uintptr(inv.StatusFD), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return 0, fmt.Errorf("fcntl(%d, F_SETFD, FD_CLOEXEC): %w", inv.StatusFD, err)
	}
	// Whatever else is open and inheritable above it came from the
	// supervisor's own caller, past os/exec (which passes on any
	// descriptor not marked close-on-exec): no process of the run gets
	// it (CVE-2024-21626). The Go runtime's own are close-on-exec.
	if err := closeStrays(inv.StatusFD); err != nil {
		return 0, err
	}
	// Caught before the program exists, so that none sent meanwhile is
	// lost: a signal to PID 1 waits in the channel until there is a
	// program to forward it to.
	signal.Notify(sigs, forwarded...)
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: "/dev/null", Err: err}
	}
	defer unix.Close(null)

	// The setup init: this binary again (still reachable here: nothing
	// is mounted or pivoted yet), with every descriptor below the exit
	// pipe at its own number (spec.FDs) and the reaper's environment
	// (the supervisor's initEnv; the program's is the spec's).
	files := make([]uintptr, inv.StatusFD)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := syscall.ForkExec("/proc/self/exe", Invocation{SyncFD: inv.SyncFD, StatusFD: -1}.argv(), &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, fmt.Errorf("start the setup init: %w", err)
	}

	// Keep nothing of the run but the exit pipe. The program's streams
	// and report pipe end only when their last writer is gone, the sync
	// socket's EOF tells the supervisor the program was exec'd, and a
	// mount descriptor is a way out of the new root (CVE-2024-21626).
	for fd := range 3 {
		if err := unix.Dup3(null, fd, 0); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			return 0, fmt.Errorf("dup3(/dev/null, %d): %w", fd, err)
		}
	}
	if err := unix.CloseRange(3, uint(inv.StatusFD-1), 0); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return 0, fmt.Errorf("close_range(3, %d): %w", inv.StatusFD-1, err)
	}
	// Not dumpable: no core, and /proc/1's memory, descriptors and root
	// are closed to anyone without CAP_SYS_PTRACE over the namespace.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return 0, fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return pid, nil
}

// sigs receives the forwarded signals.
var sigs = make(chan os.Signal, 32)

// reap forwards signals to pid and reaps every child until pid ends, then
// reports its wait status on the exit pipe and returns the reaper's exit
// code. It blocks in wait4 itself: the kernel wakes it when a child
// ends, so the program's end reaches the supervisor without waiting for
// the Go runtime to deliver SIGCHLD to a goroutine and schedule it (a
// new thread, at times). The signals go on in their own goroutine.
func reap(statusFD, pid int) int {
	go forward(pid)
	ws, err := waitProgram(pid)
	if err == nil {
		// Orphans that ended with it; the kernel kills the rest when the
		// reaper exits.
		err = reapRest()
	}
	msg := spec.EncodeExit(uint32(ws))
	if err != nil {
		msg = spec.EncodeError(result.StepError("reaper", err))
	}
	if _, werr := unix.Write(statusFD, msg); werr != nil || err != nil {
		return 1
	}
	return 0
}

// forward passes every signal in sigs on to pid. ESRCH: the program has
// just ended, and reap says so next.
func forward(pid int) {
	for s := range sigs {
		unix.Kill(pid, s.(syscall.Signal))
	}
}

// waitProgram reaps children, orphans included, blocking, until pid ends;
// it returns pid's wait status.
func waitProgram(pid int) (unix.WaitStatus, error) {
	for {
		var st unix.WaitStatus
		got, err := unix.Wait4(-1, &st, 0, nil)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return 0, fmt.Errorf("wait4 for the program (pid %d): %w", pid, err)
		case got == pid:
			return st, nil
		}
	}
}

// reapRest reaps, without blocking, every child that has ended too.
func reapRest() error {
	for {
		var st unix.WaitStatus
		got, err := unix.Wait4(-1, &st, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ECHILD), err == nil && got == 0:
			return nil
		case err != nil:
			return fmt.Errorf("wait4 after the program: %w", err)
		}
	}
}

// closeStrays closes every descriptor above last that is not
// close-on-exec, read from /proc/self/fd (the host's /proc: nothing is
// mounted yet).
func closeStrays(last int) error {
	const dir = "/proc/self/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= last {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // the listing's own descriptor, gone; or the runtime's
		}
		if err := unix.Close(fd); err != nil {
			return fmt.Errorf("close stray descriptor %d: %w", fd, err)
		}
	}
	return nil
}
