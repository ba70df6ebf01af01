package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
)

// TestFreshWorkspace: the fresh workspace is a tmpfs of the plan's size
// and inodes, owned by the sandbox user, mode 0700, nosuid, nodev and
// noexec; filling it (from here, as root, through the supervisor's own
// descriptor) fails with ENOSPC and reached names the bound.
func TestFreshWorkspace(t *testing.T) {
	mustwork.NeedRoot(t) // fsopen
	ids := testIDs(t)
	for _, kind := range []string{result.ReachedWorkspaceSize, result.ReachedWorkspaceInodes} {
		t.Run(kind, func(t *testing.T) {
			ws, err := freshWorkspace(plan.Workspace{Size: 1 << 20, Inodes: 32}, ids)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.close()
			var st unix.Statfs_t
			if err := unix.Fstatfs(int(ws.root.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			if st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*st.Bsize != 1<<20 || st.Files != 32 {
				t.Errorf("statfs %+v: want a tmpfs of 1 MiB and 32 inodes", st)
			}
			if want := int64(unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC); st.Flags&want != want {
				t.Errorf("mount flags %#x lack nosuid, nodev, noexec", st.Flags)
			}
			var fi unix.Stat_t
			if err := unix.Fstat(int(ws.root.Fd()), &fi); err != nil {
				t.Fatal(err)
			}
			if id := ids.Sandbox; fi.Uid != id || fi.Gid != id || fi.Mode&0o7777 != 0o700 {
				t.Errorf("workspace root uid %d gid %d mode %o, want %d:%d 0700", fi.Uid, fi.Gid, fi.Mode&0o7777, id, id)
			}
			if *ws.bytes != 1<<20 || *ws.inodes != 32 {
				t.Errorf("bounds %d bytes %d inodes", *ws.bytes, *ws.inodes)
			}
			if got := ws.reached(); len(got) != 0 {
				t.Errorf("an empty workspace reached %v", got)
			}
			err = fill(ws.root, kind == result.ReachedWorkspaceInodes)
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("filling the workspace: %v, want ENOSPC", err)
			}
			if got := ws.reached(); !slices.Contains(got, kind) {
				t.Errorf("reached %v, want %s", got, kind)
			}
		})
	}
}

// fill writes into the directory dir until an error (at most 64 files
// of 64 KiB, or 64 empty files): the first error.
func fill(dir *os.File, empty bool) error {
	block := make([]byte, 64<<10)
	for i := range 64 {
		fd, err := unix.Openat(int(dir.Fd()), fmt.Sprint(i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		if !empty {
			_, err = unix.Write(fd, block)
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// TestGivenWorkspaceBound: a directory on a filesystem larger than the
// bounds is unbounded (nil) and refused when the plan requires a bounded
// workspace, with an error naming it and the requirement; one on a small
// tmpfs is bounded by that filesystem.
func TestGivenWorkspaceBound(t *testing.T) {
	mustwork.NeedRoot(t) // chown, mount
	// A directory of a user of its own (not root), idmapped to the run's
	// program like a caller's.
	const id = 4242
	ids := testIDs(t)
	mk := func(dir string) string {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, id, id); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	bounds := plan.Workspace{Size: 64 << 20, Inodes: 1024}

	big := mk(filepath.Join(t.TempDir(), "big"))
	ws, err := givenWorkspace(big, bounds, ids)
	if err != nil {
		t.Fatal(err)
	}
	ws.close()
	if ws.bytes != nil || ws.inodes != nil || ws.reached() != nil {
		t.Errorf("a directory on the test's filesystem is bounded: %v bytes, %v inodes", ws.bytes, ws.inodes)
	}
	bounds.RequireBounded = true
	_, err = givenWorkspace(big, bounds, ids)
	if err == nil || !strings.Contains(err.Error(), big) || !strings.Contains(err.Error(), hostcheck.BoundedWorkspace) {
		t.Errorf("required bounded, got %v: want an error naming %s and %s", err, big, hostcheck.BoundedWorkspace)
	}

	small := mk(filepath.Join(t.TempDir(), "small"))
	if err := unix.Mount("tmpfs", small, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=4m,nr_inodes=100"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(small, unix.MNT_DETACH)
	if err := os.Chown(small, id, id); err != nil {
		t.Fatal(err)
	}
	ws, err = givenWorkspace(small, bounds, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	if ws.bytes == nil || *ws.bytes != 4<<20 || ws.inodes == nil || *ws.inodes != 100 {
		t.Errorf("a 4 MiB, 100-inode tmpfs bounded as %v bytes, %v inodes", ws.bytes, ws.inodes)
	}
}
