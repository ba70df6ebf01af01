package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/plan"
)

// testFiles returns a fresh workspace's Files, and the workspace's root
// as a host path (through /proc/self/fd) for the test to plant what a
// program could.
func testFiles(t *testing.T, size int64) (*Files, string, *runIDs) {
	t.Helper()
	mustwork.NeedRoot(t) // fsopen, chown
	ids := testIDs(t)
	ws, err := freshWorkspace(plan.Workspace{Size: size, Inodes: 64}, ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.close() })
	return ws.files, fmt.Sprintf("/proc/self/fd/%d", ws.root.Fd()), ids
}

// TestFilesRoundTrip: files written from the host (nested, replaced) read
// back, are owned by the program with the mode asked (no setuid), their
// new parent directories too; List, Walk and Remove see the same tree.
func TestFilesRoundTrip(t *testing.T) {
	f, dir, ids := testFiles(t, 1<<20)
	if err := f.WriteFile("data/in/a.csv", []byte("x,y\n1,2\n"), 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("b.txt", []byte("a long first version"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("./b.txt", []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadFile("b.txt", 100)
	if err != nil || string(got) != "short" {
		t.Fatalf("ReadFile b.txt = %q, %v; want the second version", got, err)
	}
	for p, mode := range map[string]uint32{"data": 0o755, "data/in": 0o755, "data/in/a.csv": 0o755, "b.txt": 0o644} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != ids.Sandbox || st.Gid != ids.Sandbox || st.Mode&0o7777 != mode {
			t.Errorf("%s: owner %d:%d mode %04o; want %d:%d %04o", p, st.Uid, st.Gid, st.Mode&0o7777, ids.Sandbox, ids.Sandbox, mode)
		}
	}
	if err := os.Symlink("b.txt", filepath.Join(dir, "data", "link")); err != nil {
		t.Fatal(err)
	}
	ls, err := f.List("data")
	want := []FileInfo{
		{Path: "data/in", Type: TypeDir, Mode: 0o755},
		{Path: "data/link", Type: TypeSymlink, Mode: 0o777},
	}
	if err != nil || !slices.Equal(ls, want) {
		t.Errorf("List(data) = %+v, %v; want %+v", ls, err, want)
	}
	walk, err := f.Walk()
	want = []FileInfo{
		{Path: "b.txt", Type: TypeFile, Size: 5, Mode: 0o644},
		{Path: "data/in/a.csv", Type: TypeFile, Size: 8, Mode: 0o755},
	}
	if err != nil || !slices.Equal(walk, want) {
		t.Errorf("Walk() = %+v, %v; want %+v", walk, err, want)
	}
	if err := f.Remove("data/in"); !errors.Is(err, unix.ENOTEMPTY) {
		t.Errorf("Remove of a full directory: %v; want ENOTEMPTY", err)
	}
	for _, p := range []string{"data/in/a.csv", "data/in", "data/link"} {
		if err := f.Remove(p); err != nil {
			t.Errorf("Remove(%s): %v", p, err)
		}
	}
	if _, err := f.ReadFile("data/in/a.csv", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a removed file: %v; want ErrNotExist", err)
	}
	if ls, err := f.List(""); err != nil || len(ls) != 2 {
		t.Errorf("List(\"\") = %+v, %v; want b.txt and data", ls, err)
	}
}

// TestFilesRefused: paths that leave /workspace, and links a program
// planted to host files and directories, are refused before anything is
// read or written; the host's canaries are untouched.
func TestFilesRefused(t *testing.T) {
	f, dir, _ := testFiles(t, 1<<20)
	host := t.TempDir()
	canary := filepath.Join(host, "canary")
	if err := os.WriteFile(canary, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What a program could plant: links to a host file, to a host
	// directory, to /workspace itself, and a relative one climbing out.
	for name, target := range map[string]string{
		"file":  canary,
		"dir":   host,
		"self":  "/workspace",
		"climb": "../../../../../../" + strings.TrimPrefix(canary, "/"),
		"inner": "ok",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ok"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"", "/etc/passwd", "../x", "a/../../x", "a/..", "x\x00y",
		"file", "dir/canary", "self/ok", "climb", "inner", "dir/new", "file/x",
		"/proc/self/root/etc/passwd", "..",
	} {
		if _, err := f.ReadFile(p, 100); !errors.Is(err, ErrRefused) {
			t.Errorf("ReadFile(%q): %v; want ErrRefused", p, err)
		}
		if err := f.WriteFile(p, []byte("sandbox"), 0o644); !errors.Is(err, ErrRefused) {
			t.Errorf("WriteFile(%q): %v; want ErrRefused", p, err)
		}
		if _, err := f.List(p); p != "" && !errors.Is(err, ErrRefused) {
			t.Errorf("List(%q): %v; want ErrRefused", p, err)
		}
	}
	for _, p := range []string{"dir/canary", "self/ok", "../x", "/etc/passwd"} {
		if err := f.Remove(p); !errors.Is(err, ErrRefused) {
			t.Errorf("Remove(%q): %v; want ErrRefused", p, err)
		}
	}
	if b, err := os.ReadFile(canary); err != nil || string(b) != "host" {
		t.Errorf("host canary: %q, %v; want it untouched", b, err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 1 {
		t.Errorf("host directory holds %d entries; want only the canary", len(ents))
	}
	// A link itself may be removed: it is the program's.
	if err := f.Remove("file"); err != nil {
		t.Errorf("Remove of a link: %v", err)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("removing a link removed its target: %v", err)
	}
}

// TestFilesNotRegular: a FIFO the program made is neither read nor
// written, and never blocks the caller.
func TestFilesNotRegular(t *testing.T) {
	f, dir, _ := testFiles(t, 1<<20)
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := f.ReadFile("fifo", 100); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(fifo): %v; want ErrNotRegular", err)
		}
		if err := f.WriteFile("fifo", []byte("x"), 0o644); !errors.Is(err, ErrNotRegular) {
			t.Errorf("WriteFile(fifo): %v; want ErrNotRegular", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO blocked the caller")
	}
}

// TestFilesBounds: a read larger than the caller's cap and a write
// larger than the tmpfs fail; after the workspace closes every call
// fails with ErrNoFiles.
func TestFilesBounds(t *testing.T) {
	mustwork.NeedRoot(t)
	ids := testIDs(t)
	ws, err := freshWorkspace(plan.Workspace{Size: 1 << 20, Inodes: 64}, ids)
	if err != nil {
		t.Fatal(err)
	}
	f := ws.files
	if err := f.WriteFile("ten", bytes.Repeat([]byte("x"), 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFile("ten", 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the cap: %v; want ErrTooLarge", err)
	}
	if b, err := f.ReadFile("ten", 10); err != nil || len(b) != 10 {
		t.Errorf("ReadFile at the cap: %d bytes, %v", len(b), err)
	}
	if err := f.WriteFile("big", make([]byte, 2<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("WriteFile larger than the tmpfs: %v; want ENOSPC", err)
	}
	ws.close()
	if _, err := f.ReadFile("ten", 10); !errors.Is(err, ErrNoFiles) {
		t.Errorf("ReadFile after close: %v; want ErrNoFiles", err)
	}
	if _, err := f.Walk(); !errors.Is(err, ErrNoFiles) {
		t.Errorf("Walk after close: %v; want ErrNoFiles", err)
	}
}

func TestCheckPath(t *testing.T) {
	for p, want := range map[string]string{
		"a":        "a",
		"./a/b/":   "a/b",
		"a//b":     "a/b",
		"a/./b":    "a/b",
		"a/../b":   "",
		"../a":     "",
		"/a":       "",
		".":        "",
		"":         "",
		"a\x00":    "",
		"...":      "...",
		"..a/b..":  "..a/b..",
		"a/b/..":   "",
		"/":        "",
		"./":       "",
		"a/b/c.py": "a/b/c.py",
	} {
		got, err := checkPath(p, false)
		if want == "" && !errors.Is(err, ErrRefused) || want != "" && (err != nil || got != want) {
			t.Errorf("checkPath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"", ".", "./"} {
		if got, err := checkPath(p, true); err != nil || got != "." {
			t.Errorf("checkPath(%q, dir) = %q, %v; want .", p, got, err)
		}
	}
}
