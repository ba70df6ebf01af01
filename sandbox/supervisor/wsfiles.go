package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Files reads and writes a fresh workspace from the host, for a caller
// that places a program's input files before it runs, lists what it
// wrote afterwards, or exchanges files with a live session between
// cells. Paths are relative to /workspace.
//
// The workspace belongs to the program, which may run at the same time
// (a session) and may have planted anything in it: symbolic links to
// host files, FIFOs, directories renamed mid-call. So every path is
// resolved by the kernel from the mount's root descriptor with openat2:
// RESOLVE_BENEATH (no component may leave the root, "..", absolute
// symlinks and races included), RESOLVE_NO_SYMLINKS and
// RESOLVE_NO_MAGICLINKS (no link is followed at all, so a link planted
// by the program never takes the host's root, which these calls run as,
// anywhere), RESOLVE_NO_XDEV (nothing mounted on top is crossed). Files
// are opened non-blocking and checked to be regular before a byte is
// read or written: a FIFO never blocks the caller. A refused path fails
// with ErrRefused and the reason.
//
// What the host writes is owned by the program's host uid and gid (as
// if the program had written it), with permission bits only (no setuid:
// the mount is nosuid anyway). Sizes are bounded by the tmpfs (ENOSPC)
// and, for reads, by the caller's cap. The pages of a file written from
// here are charged to the caller's memory cgroup, not the run's: the
// kernel charges a tmpfs page to the task that allocates it. The tmpfs
// size bounds them all the same.
//
// A caller's own directory (--workspace DIR) has no Files: it is the
// caller's, who reads and writes it directly.
type Files struct {
	mu       sync.RWMutex
	root     *os.File // the mount's root; closed with the workspace
	uid, gid int      // the program's host ids
	closed   bool
}

// FileInfo describes one entry of the workspace.
type FileInfo struct {
	Path string   `json:"path"` // relative to /workspace
	Type FileType `json:"type"`
	Size int64    `json:"size"`
	Mode uint32   `json:"mode"` // permission bits
}

// FileType is the kind of a workspace entry.
type FileType string

// The kinds of workspace entries. Only files and directories can be read
// or listed; the others are listed, never followed or opened.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
	TypeOther   FileType = "other" // FIFO, socket
)

// Errors of Files besides the system's own (fs.ErrNotExist for a missing
// path, ENOSPC for a full workspace), for callers that map them (the
// service: 400, 413).
var (
	// ErrRefused: a path that is not a plain relative path beneath
	// /workspace, or that passes through a symbolic link.
	ErrRefused = errors.New("path refused")
	// ErrTooLarge: a file larger than the caller's cap.
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular: a read or write of something not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNoFiles: the workspace is closed, or not a fresh one.
	ErrNoFiles = errors.New("no workspace files")
)

// resolveFlags are the openat2 rules of every lookup (see Files).
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// dirMode is the mode of the directories WriteFile creates.
const dirMode = 0o755

// newFiles returns the Files of the workspace whose root is root, written
// as the program's host id.
func newFiles(root *os.File, id uint32) *Files {
	return &Files{root: root, uid: int(id), gid: int(id)}
}

// close makes every later call fail with ErrNoFiles; it waits for calls
// in progress, so that the root can be closed after it.
func (f *Files) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// use runs fn with the root's descriptor, unless the workspace is closed.
func (f *Files) use(fn func(root int) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return fmt.Errorf("%w: the workspace is closed", ErrNoFiles)
	}
	return fn(int(f.root.Fd()))
}

// WriteFile writes data to p, creating it (and its missing parent
// directories) or replacing its content, with the permission bits of
// mode, owned by the program.
func (f *Files) WriteFile(p string, data []byte, mode os.FileMode) error {
	rel, err := checkPath(p, false)
	if err != nil {
		return err
	}
	return f.use(func(root int) error {
		dir, base := path.Split(rel)
		dfd, err := f.mkdirAll(root, dir)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		fd, err := openBeneath(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_NONBLOCK, uint64(mode.Perm()))
		if err != nil {
			return pathError("open", rel, err)
		}
		w := os.NewFile(uintptr(fd), rel)
		defer w.Close()
		if err := isRegular(fd, rel); err != nil {
			return err
		}
		if err := unix.Fchown(fd, f.uid, f.gid); err != nil {
			return pathError("chown", rel, err)
		}
		if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
			return pathError("chmod", rel, err)
		}
		if err := unix.Ftruncate(fd, 0); err != nil {
			return pathError("truncate", rel, err)
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("workspace file %s: %w", rel, err)
		}
		return w.Close()
	})
}

// ReadFile returns the content of the regular file p, at most max bytes:
// a larger file fails with ErrTooLarge.
func (f *Files) ReadFile(p string, max int64) ([]byte, error) {
	rel, err := checkPath(p, false)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = f.use(func(root int) error {
		fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return pathError("open", rel, err)
		}
		r := os.NewFile(uintptr(fd), rel)
		defer r.Close()
		if err := isRegular(fd, rel); err != nil {
			return err
		}
		// The size may change while it is read (a session's program
		// writes it): the bound is on what is read, not on fstat.
		data, err = io.ReadAll(io.LimitReader(r, max+1))
		if err != nil {
			return fmt.Errorf("workspace file %s: %w", rel, err)
		}
		if int64(len(data)) > max {
			data = nil
			return fmt.Errorf("workspace file %s: %w: more than %d bytes", rel, ErrTooLarge, max)
		}
		return nil
	})
	return data, err
}

// List returns the entries of the directory dir ("" or "." for
// /workspace itself), sorted by name. Links are listed, not followed.
func (f *Files) List(dir string) ([]FileInfo, error) {
	rel, err := checkPath(dir, true)
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	err = f.use(func(root int) error {
		out, _, err = listDir(root, rel)
		return err
	})
	return out, err
}

// Remove removes the file, link or empty directory p (a link itself,
// never its target).
func (f *Files) Remove(p string) error {
	rel, err := checkPath(p, false)
	if err != nil {
		return err
	}
	return f.use(func(root int) error {
		dir, base := path.Split(rel)
		dfd, err := openBeneath(root, cleanDir(dir), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return pathError("open", cleanDir(dir), err)
		}
		defer unix.Close(dfd)
		err = unix.Unlinkat(dfd, base, 0)
		if errors.Is(err, unix.EISDIR) {
			err = unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
		}
		if err != nil {
			return pathError("remove", rel, err)
		}
		return nil
	})
}

// Walk returns every regular file under /workspace with its size, sorted
// by path (a run's files, once its program has ended). A directory the
// kernel cannot open from the root (a path longer than PATH_MAX, one the
// program renamed meanwhile) is left out.
func (f *Files) Walk() ([]FileInfo, error) {
	var out []FileInfo
	err := f.use(func(root int) error {
		for queue := []string{"."}; len(queue) > 0; queue = queue[1:] {
			entries, dirs, err := listDir(root, queue[0])
			if err != nil {
				if queue[0] == "." {
					return err
				}
				continue
			}
			for _, e := range entries {
				if e.Type == TypeFile {
					out = append(out, e)
				}
			}
			queue = append(queue, dirs...)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, err
}

// listDir lists the directory rel beneath root: its entries, and the
// paths of those that are directories.
func listDir(root int, rel string) ([]FileInfo, []string, error) {
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, nil, pathError("open", rel, err)
	}
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, nil, fmt.Errorf("workspace directory %s: %w", rel, err)
	}
	slices.Sort(names)
	var out []FileInfo
	var dirs []string
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed since it was listed
		}
		p := path.Join(rel, name)
		e := FileInfo{Path: p, Type: TypeOther, Mode: st.Mode & 0o777}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type, e.Size = TypeFile, st.Size
		case unix.S_IFDIR:
			e.Type = TypeDir
			dirs = append(dirs, p)
		case unix.S_IFLNK:
			e.Type = TypeSymlink
		}
		out = append(out, e)
	}
	return out, dirs, nil
}

// mkdirAll opens the directory dir beneath root, creating what is
// missing of it one component at a time (each owned by the program), and
// returns its descriptor.
func (f *Files) mkdirAll(root int, dir string) (int, error) {
	fd, err := openBeneath(root, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, pathError("open", ".", err)
	}
	done := "."
	for _, name := range strings.Split(cleanDir(dir), "/") {
		if name == "." {
			continue
		}
		done = path.Join(done, name)
		next, err := openBeneath(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			next, err = f.mkdir(fd, name)
		}
		unix.Close(fd)
		if err != nil {
			return -1, pathError("open", done, err)
		}
		fd = next
	}
	return fd, nil
}

// mkdir creates the directory name in dfd, owned by the program, and
// opens it. One created meanwhile by the program is used as it is.
func (f *Files) mkdir(dfd int, name string) (int, error) {
	if err := unix.Mkdirat(dfd, name, dirMode); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	fd, err := openBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Fchown(fd, f.uid, f.gid); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openBeneath opens p beneath the directory dfd under the rules of Files.
// The kernel asks to retry a lookup that raced with a rename (EAGAIN);
// a few tries are enough for anything but a program renaming in a loop,
// which then gets its own error back.
func openBeneath(dfd int, p string, flags int, mode uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: mode, Resolve: resolveFlags}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dfd, p, &how)
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && try < 8 {
			continue
		}
		return fd, err
	}
}

// isRegular fails unless fd is a regular file.
func isRegular(fd int, rel string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathError("stat", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("workspace file %s: %w", rel, ErrNotRegular)
	}
	return nil
}

// checkPath returns p cleaned, or ErrRefused: p must be relative, free
// of ".." and NUL, and name something beneath /workspace (or, when dir,
// /workspace itself as "" or "."). The kernel checks again (openat2):
// this only gives the common mistakes a clear message.
func checkPath(p string, dir bool) (string, error) {
	refuse := func(why string) (string, error) {
		return "", fmt.Errorf("workspace path %q: %w: %s", p, ErrRefused, why)
	}
	switch {
	case p == "" && dir:
		return ".", nil
	case p == "":
		return refuse("empty")
	case strings.IndexByte(p, 0) >= 0:
		return refuse("it contains a NUL byte")
	case strings.HasPrefix(p, "/"):
		return refuse("absolute paths are not allowed: give it relative to /workspace")
	case len(p) >= unix.PathMax:
		return refuse("longer than PATH_MAX")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return refuse(`".." is not allowed`)
	}
	rel := path.Clean(p)
	if rel == "." && !dir {
		return refuse("it names /workspace itself")
	}
	return rel, nil
}

// cleanDir turns the directory part of path.Split into a path openat2
// takes ("" becomes ".").
func cleanDir(dir string) string {
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		return "."
	}
	return dir
}

// pathError wraps err of op on rel, turning the refusals of openat2 into
// ErrRefused with the reason.
func pathError(op, rel string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("workspace path %q: %w: it is or passes through a symbolic link, which is never followed", rel, ErrRefused)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("workspace path %q: %w: it leads outside /workspace", rel, ErrRefused)
	case errors.Is(err, unix.ENXIO): // a FIFO without a reader, a socket
		return fmt.Errorf("workspace file %s: %w", rel, ErrNotRegular)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("workspace path %q: %w: a component is not a directory", rel, ErrRefused)
	}
	return &os.PathError{Op: op, Path: "/workspace/" + rel, Err: err}
}
