// Package load installs a compiled seccomp filter: one seccomp(2) call,
// pure Go and without cgo, so that the sandbox init (cmd/nsbox-init, built
// with CGO_ENABLED=0 because it starts faster) can import it without
// libseccomp, which only the supervisor needs to compile profiles.
package load

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxInsns is BPF_MAXINSNS, the kernel's limit for one classic BPF program.
const MaxInsns = 4096

// Install loads raw (a compiled seccomp.Program's Raw) as a seccomp filter on the calling
// thread with seccomp(SECCOMP_SET_MODE_FILTER). It is pure Go, a single
// system call: the init calls it last, after PR_SET_NO_NEW_PRIVS (without
// which the kernel refuses, lacking CAP_SYS_ADMIN) and right before execve.
//
// The calling goroutine must be locked to its OS thread
// (runtime.LockOSThread) and that thread must be the one that calls execve:
// the filter is per thread and execve keeps the calling thread's. No
// SECCOMP_FILTER_FLAG_TSYNC: execve ends every other thread of the process,
// so the program is filtered from its first instruction on without it;
// TSYNC would only subject the Go runtime's helper threads, in the
// microseconds before execve, to a profile written for Python, where a
// denial would crash the init with an obscure error. Never
// SECCOMP_FILTER_FLAG_SPEC_ALLOW: it would disable the kernel's speculative
// store bypass mitigation for the sandbox.
func Install(raw []byte) error {
	prog, err := Decode(raw)
	if err != nil {
		return fmt.Errorf("install seccomp filter: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("install seccomp filter (seccomp SECCOMP_SET_MODE_FILTER, %d instructions): %w", len(prog), explain(errno))
	}
	return nil
}

// Check reports whether raw has the shape of a program the kernel takes:
// whole 8-byte instructions, 1 to MaxInsns of them. Every source of a
// filter (libseccomp, a cache entry, a build-time golden) is checked with
// it before use, so that a bad program is refused with its size rather
// than with the kernel's bare EINVAL.
func Check(raw []byte) error {
	if len(raw) == 0 || len(raw)%8 != 0 {
		return fmt.Errorf("program is %d bytes: want a non-zero multiple of 8 (struct sock_filter)", len(raw))
	}
	if n := len(raw) / 8; n > MaxInsns {
		return fmt.Errorf("program has %d instructions: the kernel takes at most %d", n, MaxInsns)
	}
	return nil
}

// Decode splits raw into struct sock_filter instructions (u16 code, u8
// jt, u8 jf, u32 k; native endian), checking it first (Check).
func Decode(raw []byte) ([]unix.SockFilter, error) {
	if err := Check(raw); err != nil {
		return nil, err
	}
	prog := make([]unix.SockFilter, len(raw)/8)
	for i := range prog {
		b := raw[8*i:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:]),
		}
	}
	return prog, nil
}

// explain turns seccomp(2)'s errno into what to do about it.
func explain(errno unix.Errno) error {
	var why string
	switch errno {
	case unix.EACCES:
		why = "the thread has neither no_new_privs nor CAP_SYS_ADMIN: set PR_SET_NO_NEW_PRIVS first"
	case unix.EINVAL:
		why = "the kernel rejected the program (invalid classic BPF), or it lacks CONFIG_SECCOMP_FILTER"
	case unix.ENOMEM:
		why = "out of memory, or the stacked filters exceed the kernel's 32768-instruction total"
	case unix.ENOSYS:
		why = "no seccomp(2) system call (kernel older than 3.17, or an outer filter blocks it)"
	case unix.EFAULT:
		why = "bug: the kernel could not read the program"
	default:
		return errno
	}
	return fmt.Errorf("%w: %s", errno, why)
}
