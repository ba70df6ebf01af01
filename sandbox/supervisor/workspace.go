package supervisor

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// userWorkspace prepares the caller's directory dir as the run's
// /workspace: a detached mount, nosuid, nodev and noexec (see
// detachedBind), checked to be writable by the program so that the run
// fails here with the reason rather than at the program's first write.
//
// The program's host uid is the run's own (ids), so it owns nothing on the
// host. Where the filesystem can, the mount is idmapped: the directory's
// owner and group appear inside as the program's uid and gid, and what the
// program creates appears on the host owned by them, with no chown of
// dir. Where it cannot, the old rule applies: dir must be writable by the
// run's uid, which in practice means writable by others.
//
// A directory owned by root (uid or gid 0) is never idmapped: the program
// would create files owned by root, setuid ones included, wherever dir is.
func userWorkspace(dir string, ids *runIDs) (*os.File, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("workspace %s: cannot read owner", dir)
	}
	mode := fi.Mode().Perm()
	why := ""
	if st.Uid == 0 || st.Gid == 0 {
		why = fmt.Sprintf("it is owned by root (%d:%d), whose files a sandbox never gets", st.Uid, st.Gid)
	} else if mode&0o300 != 0o300 {
		return nil, fmt.Errorf("workspace %s: not writable by its owner (uid %d, mode %04o), whose rights the program gets", dir, st.Uid, mode)
	}
	mnt, err := detachedBind(dir, true)
	if err != nil {
		return nil, err
	}
	if why == "" {
		err := idmap(mnt, st.Uid, st.Gid, ids.Sandbox)
		if err == nil {
			return mnt, nil
		}
		if !errors.Is(err, errNoIdmap) {
			mnt.Close()
			return nil, fmt.Errorf("workspace %s: %w", dir, err)
		}
		why = err.Error()
	}
	if writableBy(st, mode, ids.Sandbox) {
		return mnt, nil
	}
	mnt.Close()
	return nil, fmt.Errorf("workspace %s: cannot be mapped to the sandbox user: %s; and it is not writable by others (mode %04o), as the run's own host uid %d would need. Use a directory you own, on a filesystem that supports idmapped mounts (nsbox doctor), or leave --workspace out for a fresh one",
		dir, why, mode, ids.Sandbox)
}

// writableBy reports whether uid (with the same gid and no other group)
// may create files in a directory of st and mode.
func writableBy(st *syscall.Stat_t, mode os.FileMode, uid uint32) bool {
	switch {
	case st.Uid == uid:
		return mode&0o300 == 0o300
	case st.Gid == uid:
		return mode&0o030 == 0o030
	}
	return mode&0o003 == 0o003
}

// errNoIdmap wraps the reasons a mount cannot be idmapped on this host
// (kernel or filesystem), as opposed to failures of the attempt.
var errNoIdmap = errors.New("idmapped mounts unsupported")

// idmap makes the detached mount mnt show files owned by uid and gid (on
// disk) as owned by to (the program's host uid and gid), and the other
// way round for files the program creates (MOUNT_ATTR_IDMAP, Linux 5.12,
// on filesystems that support it). Ids other than uid and gid appear as
// the overflow id, which the program cannot own.
func idmap(mnt *os.File, uid, gid, to uint32) error {
	ns, err := idmapUserns(uid, gid, to)
	if err != nil {
		return err
	}
	defer ns.Close()
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	err = unix.MountSetattr(int(mnt.Fd()), "", unix.AT_EMPTY_PATH, &attr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w: the %s filesystem cannot be idmapped here (mount_setattr MOUNT_ATTR_IDMAP: %v)", errNoIdmap, fsName(mnt), err)
	}
	return &os.PathError{Op: "mount_setattr MOUNT_ATTR_IDMAP", Path: mnt.Name(), Err: err}
}

// idmapUserns returns a user namespace that maps uid to to and gid to
// to, for MOUNT_ATTR_IDMAP. A user namespace needs a process: this one is
// a copy of this binary stopped before its first instruction (it is
// traced, and execve stops a tracee), killed once its namespace is open.
func idmapUserns(uid, gid, to uint32) (*os.File, error) {
	// The tracer is the thread that forked the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess("/proc/self/exe", []string{"nsbox-idmap"}, &os.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: int(to), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: int(to), Size: 1}},
			Ptrace:      true,
			Pdeathsig:   syscall.SIGKILL,
		},
	})
	if err != nil {
		// A host that refuses the tracee (Yama's ptrace_scope 3, say)
		// cannot idmap this way: the old rule applies, with the reason.
		return nil, fmt.Errorf("%w: cannot start the process of an idmap user namespace: %v", errNoIdmap, err)
	}
	defer func() {
		p.Kill()
		p.Wait()
	}()
	path := fmt.Sprintf("/proc/%d/ns/user", p.Pid)
	ns, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return ns, nil
}

// fsName names the filesystem of f, for messages.
func fsName(f *os.File) string {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return "workspace's"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse"
	}
	return fmt.Sprintf("%#x", st.Type)
}

// ProbeIdmap reports whether a workspace in dir could be idmapped (nil),
// or why not, for nsbox doctor. It maps dir's owner to the first id of r.
func ProbeIdmap(dir string, r IDRange) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read owner", dir)
	}
	mnt, err := detachedBind(dir, true)
	if err != nil {
		return err
	}
	defer mnt.Close()
	return idmap(mnt, st.Uid, st.Gid, r.Base+1)
}
