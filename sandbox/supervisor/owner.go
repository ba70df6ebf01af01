package supervisor

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The thread that clones a run's init: locked for the init's life and
// given the run's first host id, so that it owns the run's user
// namespace (see start).

// offMainThread runs fn on a thread locked to it and never unlocked, so
// that the thread ends with fn (see start) — never on the process's
// main thread. The runtime does not end the main thread when a goroutine
// locked to it exits: it parks it, and it would keep the run's init id
// for the rest of the process's life. A long-lived supervisor (a
// service, a test process running sessions) would then count as a
// process of that id: sweeps of a crashed run's ids kill such
// processes. So when the goroutine finds itself on the main thread, it
// holds it, which keeps every other goroutine off it, and runs fn on
// another.
func offMainThread(fn func()) {
	runtime.LockOSThread()
	if unix.Gettid() != unix.Getpid() {
		fn() // never unlocked: the thread ends with this goroutine
		return
	}
	defer runtime.UnlockOSThread()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not the main thread: this goroutine holds it
		fn()
	}()
	<-done
}

// secbitNoSetuidFixup is SECBIT_NO_SETUID_FIXUP (linux/securebits.h).
const secbitNoSetuidFixup = 1 << 2

// becomeOwner gives the calling thread, and only it, the host uid and gid
// id, keeping its capabilities: SECBIT_NO_SETUID_FIXUP stops the kernel
// from clearing them at the uid change. Raw system calls: syscall.Set*
// and glibc change every thread of the process. The thread must be
// locked and must never run anything else (it dies with its goroutine).
func becomeOwner(id uint32) error {
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, secbitNoSetuidFixup, 0, 0, 0, 0); e != 0 {
		// EPERM: a locked bit (set by whatever started nsbox) forbids the
		// change. Running without it would charge the run's per-user
		// counts to host root: refuse, and say which bits.
		cur, _, _ := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0, 0, 0, 0)
		return fmt.Errorf("prctl(PR_SET_SECUREBITS, NO_SETUID_FIXUP): %w (securebits are %#x; "+
			"a locked bit set by nsbox's parent forbids the change: start nsbox without locked securebits)", e, cur)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id), uintptr(id), uintptr(id)); e != 0 {
		return fmt.Errorf("setresgid(%d) on the init's thread: %w", id, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id), uintptr(id), uintptr(id)); e != 0 {
		return fmt.Errorf("setresuid(%d) on the init's thread: %w", id, e)
	}
	// Read back: the namespace's owner must be id, and the thread must
	// still be able to write the maps (CAP_SETUID, CAP_SETGID,
	// CAP_SYS_ADMIN), or the run would fail half-way.
	var r, e, s uint32
	unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&s)))
	if r != id || e != id || s != id {
		return fmt.Errorf("bug: uids %d/%d/%d after setresuid(%d)", r, e, s, id)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, c := range []int{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_SYS_ADMIN} {
		if data[c/32].Effective&(1<<(c%32)) == 0 {
			return fmt.Errorf("capability %d lost at setresuid(%d) on the init's thread", c, id)
		}
	}
	return nil
}
