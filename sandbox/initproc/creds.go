package initproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dropBoundingSet removes every capability from the bounding set, so no
// later execve (of a file with capabilities) can regain one. It needs
// CAP_SETPCAP, so it runs before the uid change. The bounding set is
// per-thread: the init runs on one locked OS thread, the one that execs.
func dropBoundingSet() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	return nil
}

// lastCap reads the highest capability number this kernel knows.
func lastCap() (int, error) { return readSysctlInt("/proc/sys/kernel/cap_last_cap", 0, 63) }

// readSysctlInt reads a /proc/sys integer and refuses one outside [lo, hi].
func readSysctlInt(p string, lo, hi int) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("read %s: unexpected value %q", p, b)
	}
	return n, nil
}

// dropIDs switches this thread, the one that execs the program, to the
// unprivileged sandbox user: supplementary groups first (they need
// CAP_SETGID), then gid, then uid (after which it has no capability left
// to change ids again), and reads all three back.
//
// Per thread, like the capability, PDEATHSIG, no_new_privs, Landlock and
// seccomp steps: raw system calls, not syscall.Set*, which apply to every
// thread of the process and, in this cgo binary, go through glibc's setxid
// broadcast: a signal to each of the init's runtime threads and a wait for
// every one, which made it the init's costliest step after the Go
// runtime's start (docs/benchmarks.md). The other threads only
// ever run the Go runtime and end at execve, which keeps this thread's
// credentials.
//
// In rootless mode with the caller's uid mapped alone, the user namespace
// denies setgroups (an unprivileged gid map requires it): the caller's
// supplementary groups stay, and checkIDs accepts them only as the
// overflow gid (unmapped: no group inside) or the program's own gid.
func dropIDs(uid, gid int) error {
	denied := false
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		if e != unix.EPERM || !setgroupsDenied() {
			return fmt.Errorf("setgroups([]): %w", e)
		}
		denied = true
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid(%d): %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid(%d): %w", uid, e)
	}
	return checkIDs(uid, gid, denied)
}

// setgroupsDenied reports whether this user namespace denies setgroups.
func setgroupsDenied() bool {
	b, err := os.ReadFile("/proc/self/setgroups")
	return err == nil && strings.TrimSpace(string(b)) == "deny"
}

// checkIDs fails unless this thread's real, effective and saved ids are
// uid and gid and it has no supplementary group: an id left behind is an
// error, not a warning.
func checkIDs(uid, gid int, groupsDenied bool) error {
	r, e, s := unix.Getresuid()
	if r != uid || e != uid || s != uid {
		return fmt.Errorf("uids %d/%d/%d after setresuid(%d)", r, e, s, uid)
	}
	r, e, s = unix.Getresgid()
	if r != gid || e != gid || s != gid {
		return fmt.Errorf("gids %d/%d/%d after setresgid(%d)", r, e, s, gid)
	}
	groups, err := unix.Getgroups()
	if err != nil {
		return fmt.Errorf("getgroups: %w", err)
	}
	if groupsDenied {
		over, err := overflowGID()
		if err != nil {
			return err
		}
		for _, g := range groups {
			if g != over && g != gid {
				return fmt.Errorf("supplementary group %d is mapped, and setgroups is denied", g)
			}
		}
		return nil
	}
	if len(groups) != 0 {
		return fmt.Errorf("supplementary groups %v after setgroups([])", groups)
	}
	return nil
}

// clearCaps empties the permitted, effective and inheritable sets of this
// thread (the uid change already cleared permitted and effective; this
// also clears inheritable and makes the outcome explicit), then reads them
// back: a capability left behind is an error, not a warning.
func clearCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset(0): %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for i, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after clearing (word %d: eff %#x prm %#x inh %#x)", i, d.Effective, d.Permitted, d.Inheritable)
		}
	}
	return nil
}

// setPdeathsig asks the kernel to SIGKILL this process when its parent
// (the reaper) dies. The kernel resets it on every credential change,
// so it is set again after dropIDs.
func setPdeathsig() error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	return nil
}

// setNoNewPrivs makes execve unable to grant privileges (setuid bits, file
// capabilities); seccomp without CAP_SYS_ADMIN also requires it.
func setNoNewPrivs() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil || v != 1 {
		return fmt.Errorf("prctl(PR_GET_NO_NEW_PRIVS) = %d, %v: not set", v, err)
	}
	return nil
}

// closeExtraFDs marks every descriptor above stderr close-on-exec: the
// mount fds of the binds, the sync socket and whatever the Go runtime
// opened. CVE-2024-21626: a host directory fd that survives into
// the program lets it reach the host filesystem through /proc/self/fd.
// CLOEXEC rather than close: the sync socket must stay usable to report a
// failed execve, and its closing at exec tells the supervisor exec worked.
func closeExtraFDs(keep int) error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range(3, ~0, CLOSE_RANGE_CLOEXEC): %w", err)
	}
	if keep == 0 {
		return nil
	}
	// The report pipe: a write end only, to the supervisor; it reaches no
	// host file.
	if _, err := unix.FcntlInt(uintptr(keep), unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("fcntl(%d, F_SETFD, 0): %w", keep, err)
	}
	return nil
}

// verifyCwd enters dir and checks the kernel agrees the cwd is that path
// in the new root. CVE-2024-21626: a cwd inherited from (or pointing into)
// the host shows up as "(unreachable)/..." or a different inode.
func verifyCwd(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return &os.PathError{Op: "chdir", Path: dir, Err: err}
	}
	got, err := unix.Getwd()
	if err != nil {
		return fmt.Errorf("getcwd: %w", err)
	}
	if got != dir {
		return fmt.Errorf("cwd is %q, want %q: current directory outside the sandbox root", got, dir)
	}
	var cwd, want unix.Stat_t
	if err := unix.Stat(".", &cwd); err != nil {
		return &os.PathError{Op: "stat", Path: ".", Err: err}
	}
	if err := unix.Stat(dir, &want); err != nil {
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if cwd.Dev != want.Dev || cwd.Ino != want.Ino {
		return fmt.Errorf("cwd inode differs from %s", dir)
	}
	return nil
}

// overflowGID is the gid an unmapped group shows as.
func overflowGID() (int, error) {
	return readSysctlInt("/proc/sys/kernel/overflowgid", 0, 1<<32-1)
}
