package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/userns"
)

// InitBinary is the file name of the stand-alone init (cmd/nsbox-init):
// the same init code as `nsbox init`, built without cgo, so it starts
// faster (docs/benchmarks.md). make build puts it next to nsbox.
const InitBinary = "nsbox-init"

// initFDMin is where the opened init goes in this process: above every
// descriptor number the init is given (sync, binds, report, tasks), so
// the fork code's dup2s cannot land on it before execve.
const initFDMin = 100

// initExe is the path to start as the sandbox init. The stand-alone init
// beside the running binary is opened once (InitFile) and executed through
// /proc/self/fd: the kernel checks no directory on the way for the
// unprivileged uid the init execs as (a binary under /root works, as
// /proc/self/exe does), and the file executed is the one checked.
// Otherwise the running binary itself: /proc/self/exe, whose hidden init
// command is the same init.
var initExe = sync.OnceValue(func() string {
	f, err := InitFile()
	if p := userns.PassedInit(); err != nil && p != nil {
		f, err = p, nil // rootless: checked on the host (internal/userns)
	}
	if err != nil {
		return "/proc/self/exe"
	}
	initFile = f // kept open for the process's life: the GC would close it
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
})

// initFile holds the opened stand-alone init; its finalizer must never run.
var initFile *os.File

// execAbove returns the path a child given files (its stdio and
// ExtraFiles) execs the init through, and what to call once the child
// exists. Before execve, Go's fork code dups descriptors in the child to
// numbers from one past the highest of files upwards (forkAndExecInChild's
// nextfd: its error pipe, then any file below its target number): the
// init file must lie above all of them, or the child execs whatever was
// dup'ed onto its number (a pipe: EACCES). initFDMin is above them for a
// supervisor of one run; a process of many runs at once (nsbox serve)
// holds descriptors past it, so the init file is then duplicated above
// them for this one start.
func execAbove(exe string, files []*os.File) (path string, release func(), err error) {
	none := func() {}
	if initFile == nil || exe != "/proc/self/fd/"+strconv.Itoa(int(initFile.Fd())) {
		return exe, none, nil
	}
	highest := 0
	for _, f := range files {
		highest = max(highest, int(f.Fd()))
	}
	floor := highest + len(files) + 3
	if int(initFile.Fd()) >= floor {
		return exe, none, nil
	}
	fd, err := unix.FcntlInt(initFile.Fd(), unix.F_DUPFD_CLOEXEC, floor)
	if err != nil {
		return "", none, &os.PathError{Op: "dup above " + strconv.Itoa(floor), Path: initFile.Name(), Err: err}
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), func() { unix.Close(fd) }, nil
}

// InitFile opens the stand-alone init beside the running binary (close-
// on-exec, at a descriptor >= initFDMin), or says why it is not used. The
// file must be a regular file owned by root and written by no one else,
// in a directory only root can write to: the init runs with every
// capability inside the new namespaces, so a file anyone else could have
// put or changed there would be a way in. An init from another nsbox build
// fails the spec's version check at its first step.
func InitFile() (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the running binary: %w", err)
	}
	return initFileIn(filepath.Dir(self))
}

// OpenBeside opens the binary name beside the running binary under the
// rules InitFile applies to the init: nsbox starts the service binary
// (nsbox-serve) this way, as root, so the same trust is needed.
func OpenBeside(name string) (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the running binary: %w", err)
	}
	return openBeside(filepath.Dir(self), name)
}

// initFileIn is InitFile for the InitBinary in dir.
func initFileIn(dir string) (*os.File, error) { return openBeside(dir, InitBinary) }

// openBeside opens name in dir if root alone can have put it there.
func openBeside(dir, name string) (*os.File, error) {
	p := filepath.Join(dir, name)
	var dst unix.Stat_t
	if err := unix.Lstat(dir, &dst); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if err := rootOnly(dir, &dst, unix.S_IFDIR); err != nil {
		return nil, err
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	if err := rootOnly(p, &st, unix.S_IFREG); err != nil {
		return nil, err
	}
	if st.Mode&0o111 == 0 {
		return nil, fmt.Errorf("%s: not executable", p)
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, initFDMin)
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: p, Err: err}
	}
	return os.NewFile(uintptr(high), p), nil
}

// rootOnly checks that st (of path) has the file type typ, is owned by
// root (or by the user nsbox runs as, whose own files are as trusted as
// nsbox itself: a rootless user's own build) and is not writable by
// group or others.
func rootOnly(path string, st *unix.Stat_t, typ uint32) error {
	switch {
	case st.Mode&unix.S_IFMT != typ:
		return fmt.Errorf("%s: not a %s", path, map[uint32]string{unix.S_IFDIR: "directory", unix.S_IFREG: "regular file"}[typ])
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s: owned by uid %d, not root", path, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s: writable by group or others (mode %o)", path, st.Mode&0o777)
	}
	return nil
}
