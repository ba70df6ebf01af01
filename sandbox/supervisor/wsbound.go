package supervisor

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
)

// workspace is /workspace as the init gets it, and what bounds it.
type workspace struct {
	// mnt is the detached mount the init attaches; the supervisor closes
	// its copy once the init has one.
	mnt *os.File
	// root is the mount's root directory (O_PATH), kept by the supervisor
	// to read the workspace's usage once the program has ended: the
	// sandbox's mount namespace is gone by then, the mount is not.
	root *os.File
	// bytes and inodes bound the workspace, nil when nothing does (a
	// caller's directory on a larger filesystem).
	bytes, inodes *int64
	// files reads and writes a fresh workspace from the host; nil for a
	// caller's directory.
	files *Files
}

// freshWorkspace makes /workspace a new tmpfs of w.Size bytes and
// w.Inodes inodes, owned by the run's program (its own host uid and gid),
// mode 0700, nosuid, nodev and
// noexec, as a detached mount (fsopen, fsconfig, fsmount).
//
// Why a tmpfs: a directory on the host's filesystem gives a run every free
// block and inode of that filesystem. Why detached: it is never attached
// in the host's mount namespace, so no host process sees it and nothing
// has to unmount it: it goes when its last descriptor closes, the
// supervisor's and the init's, and the sandbox's mount namespace dies with
// the run, even when the supervisor is killed. Its pages are memory of the
// run's cgroup: the kernel charges a tmpfs page to the cgroup of the task
// that allocates it, the program writing the file.
func freshWorkspace(w plan.Workspace, ids *runIDs) (*workspace, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "fsopen tmpfs", Err: err}
	}
	defer unix.Close(fs)
	id := fmt.Sprint(ids.Sandbox)
	for _, o := range [][2]string{
		{"size", fmt.Sprint(w.Size)},
		{"nr_inodes", fmt.Sprint(w.Inodes)},
		{"mode", "0700"},
		{"uid", id},
		{"gid", id},
	} {
		if err := unix.FsconfigSetString(fs, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("fsconfig tmpfs %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("fsconfig tmpfs create: %w", err)
	}
	fd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "fsmount tmpfs", Err: err}
	}
	ws := &workspace{mnt: os.NewFile(uintptr(fd), "workspace tmpfs")}
	if ws.root, err = openRoot(ws.mnt); err != nil {
		ws.close()
		return nil, err
	}
	ws.bytes, ws.inodes = result.Int64(w.Size), result.Int64(w.Inodes)
	ws.files = newFiles(ws.root, ids.Sandbox)
	return ws, nil
}

// givenWorkspace prepares the caller's directory as /workspace: a
// detached mount, idmapped where it can be, checked to be writable by the
// program (userWorkspace).
//
// nsbox makes no quota for it (project quotas need a filesystem made for
// them). It is bounded only when the filesystem holding it is no larger
// than the plan's bounds, such as a tmpfs or loop device the caller made
// for it; otherwise the run may fill that filesystem, and a plan that
// requires a bounded workspace refuses it.
func givenWorkspace(dir string, w plan.Workspace, ids *runIDs) (*workspace, error) {
	mnt, err := userWorkspace(dir, ids)
	if err != nil {
		return nil, err
	}
	ws := &workspace{mnt: mnt}
	if ws.root, err = openRoot(mnt); err != nil {
		ws.close()
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ws.root.Fd()), &st); err != nil {
		ws.close()
		return nil, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	// A filesystem that counts no blocks or no inodes (0) has no bound
	// of its own (tmpfs without size= or nr_inodes=, btrfs inodes).
	bytes, inodes := int64(st.Blocks)*st.Bsize, int64(st.Files)
	if bytes > 0 && bytes <= w.Size && inodes > 0 && inodes <= w.Inodes {
		ws.bytes, ws.inodes = result.Int64(bytes), result.Int64(inodes)
		return ws, nil
	}
	if w.RequireBounded {
		ws.close()
		return nil, fmt.Errorf("workspace %s is not bounded, and the policy requires %s: its filesystem has %s bytes and %s inodes, the policy allows %d bytes (limits.workspace_size) and %d inodes (limits.workspace_inodes); give a directory on a filesystem no larger (e.g. a tmpfs mounted with size= and nr_inodes=), or leave --workspace out for a fresh, bounded one",
			dir, hostcheck.BoundedWorkspace, orUnbounded(bytes), orUnbounded(inodes), w.Size, w.Inodes)
	}
	return ws, nil
}

// orUnbounded prints a filesystem's block or inode total; 0 means it
// counts none.
func orUnbounded(n int64) string {
	if n == 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

// openRoot opens the root of the detached mount mnt as an O_PATH
// directory, enough to read its filesystem's usage.
func openRoot(mnt *os.File) (*os.File, error) {
	fd, err := unix.Openat(int(mnt.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: mnt.Name(), Err: err}
	}
	return os.NewFile(uintptr(fd), mnt.Name()), nil
}

// reached returns the workspace's limits that were reached: no block or
// no inode left for the program. It is read after the program ended, so a
// program that filled the workspace and then deleted files is not
// reported. A workspace that nothing bounds reports nothing: its
// filesystem is not the run's.
func (ws *workspace) reached() []string {
	var st unix.Statfs_t
	if ws.bytes == nil || unix.Fstatfs(int(ws.root.Fd()), &st) != nil {
		return nil
	}
	var out []string
	if st.Bavail == 0 {
		out = append(out, result.ReachedWorkspaceSize)
	}
	if st.Ffree == 0 {
		out = append(out, result.ReachedWorkspaceInodes)
	}
	return out
}

// close drops the supervisor's descriptors of the workspace; a fresh
// tmpfs is freed once the sandbox's copy is gone too. Closing twice is
// harmless.
func (ws *workspace) close() error {
	if ws.files != nil {
		ws.files.close() // waits for a call in progress on root
	}
	closeAll(ws.mnt, ws.root)
	return nil
}
