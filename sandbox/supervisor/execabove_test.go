package supervisor

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExecAbove: the init file a child execs through lies above every
// descriptor Go's fork code may dup to in that child, however many
// descriptors this process holds; with few, it is the shared one.
func TestExecAbove(t *testing.T) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	high, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, initFDMin)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	saved := initFile
	initFile = os.NewFile(uintptr(high), "nsbox-init")
	defer func() {
		initFile.Close()
		initFile = saved
	}()
	exe := "/proc/self/fd/" + strconv.Itoa(high)

	// Few descriptors: the shared file.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	path, release, err := execAbove(exe, []*os.File{r, w})
	release()
	if err != nil || path != exe {
		t.Errorf("with descriptors %d, %d: %q, %v; want the shared %q", r.Fd(), w.Fd(), path, err, exe)
	}

	// Descriptors just below the shared one, as in a busy service: a
	// duplicate above them, of the same file, closed by release.
	var files []*os.File
	for fd := high - 3; fd < high; fd++ {
		if err := unix.Dup3(int(r.Fd()), fd, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		files = append(files, os.NewFile(uintptr(fd), "pipe"))
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	child := append(files, r, w)
	path, release, err = execAbove(exe, child)
	if err != nil {
		t.Fatal(err)
	}
	// Go's child dups to one past the highest (high-1), for its error
	// pipe and then at most every file: up to high-1 + 1 + len(child).
	fd, _ := strconv.Atoi(strings.TrimPrefix(path, "/proc/self/fd/"))
	if last := high - 1 + 1 + len(child); fd <= last {
		t.Errorf("init duplicated at %d; Go's child may dup up to %d", fd, last)
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(high, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(fd, &b); err != nil || a.Ino != b.Ino {
		t.Errorf("the duplicate %d is not the init file: %v", fd, err)
	}
	release()
	if err := unix.Fstat(fd, &b); err == nil {
		t.Errorf("release left descriptor %d open", fd)
	}

	// Another binary (Options.Exe) is left alone.
	if path, _, _ := execAbove("/usr/bin/other", files); path != "/usr/bin/other" {
		t.Errorf("another exe became %q", path)
	}
}
