package build

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// The real sha256 of the wheels pip picks for CPython 3.11 on x86_64
// (pip download --only-binary=:all: --no-deps, then sha256sum): six, pure
// Python, and MarkupSafe, with a small C extension module.
const (
	sixLock = "six==1.16.0 \\\n" +
		"    --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\n"
	markupsafeLock = "markupsafe==2.1.5 \\\n" +
		"    --hash=sha256:b91c037585eba9095565a3556f611e3cbfaa42ca1e865f7b8015fe5c7336d5a5\n"
)

// needPyPI skips (or fails, see mustwork) when PyPI cannot be reached.
func needPyPI(t *testing.T) {
	t.Helper()
	needBuildHost(t)
	if runtime.GOARCH != "amd64" {
		mustwork.Skip(t, "the locked wheel hashes are those of x86_64 wheels")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Head("https://pypi.org/simple/six/")
	if err != nil {
		mustwork.Skip(t, "PyPI unreachable: %v", err)
		return
	}
	resp.Body.Close()
}

// TestLockedPackages installs two real wheels from PyPI (pip's default
// cache is reused) and checks the venv, the manifest and the extension
// module's libraries.
func TestLockedPackages(t *testing.T) {
	needPyPI(t)
	lockText := "# test lock\n" + sixLock + markupsafeLock
	lock := writeLock(t, lockText)
	out := filepath.Join(t.TempDir(), "pkgs")
	m, err := Build(context.Background(), Options{Python: hostPython, Lock: lock, Out: out, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Lock == nil || !slices.Equal(m.Lock.Packages, []string{"markupsafe==2.1.5", "six==1.16.0"}) {
		t.Fatalf("manifest lock %+v", m.Lock)
	}
	kept, err := os.ReadFile(filepath.Join(out, rootfs.MetaDir, rootfs.LockFile))
	if err != nil || string(kept) != lockText {
		t.Errorf("lock.txt %q, %v", kept, err)
	}
	sp := filepath.Join(out, "venv/lib/python3.11/site-packages")
	entries, err := os.ReadDir(sp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"MarkupSafe-2.1.5.dist-info", "__pycache__", "markupsafe", "six-1.16.0.dist-info", "six.py"}; !slices.Equal(names, want) {
		t.Errorf("site-packages %v, want %v", names, want)
	}
	for _, p := range []string{"__pycache__/six.cpython-311.pyc", "markupsafe/__pycache__/__init__.cpython-311.pyc",
		"markupsafe/_speedups.cpython-311-x86_64-linux-gnu.so"} {
		if _, err := os.Stat(filepath.Join(sp, p)); err != nil {
			t.Errorf("site-packages: %v", err)
		}
	}
	bin, _ := os.ReadDir(filepath.Join(out, "venv/bin"))
	if len(bin) != 3 {
		t.Errorf("/venv/bin holds %d entries, want the 3 interpreter links", len(bin))
	}
	if r, err := rootfs.Verify(out); err != nil || !r.OK() {
		t.Errorf("Verify: %+v, %v", r, err)
	}

	// The packages import inside the root, the C speedups included.
	cmd := exec.Command("/venv/bin/python", "-c",
		"import six, markupsafe, markupsafe._speedups as s; print(six.__file__, s.__file__, markupsafe.escape('<'))")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: out, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir, cmd.Env = "/", []string{}
	got, err := cmd.CombinedOutput()
	want := "/venv/lib/python3.11/site-packages/six.py /venv/lib/python3.11/site-packages/markupsafe/_speedups.cpython-311-x86_64-linux-gnu.so &lt;\n"
	if err != nil || string(got) != want {
		t.Errorf("import in the root: %v\n%s", err, got)
	}
}

// TestLockFailures: pip's refusals come back naming the lock line and the
// package, and leave the previous root intact.
func TestLockFailures(t *testing.T) {
	needPyPI(t)
	out := filepath.Join(t.TempDir(), "pkgs")
	if _, err := Build(context.Background(), Options{Python: hostPython, Out: out}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, lock, want string }{
		{"wrong hash", "# x\nsix==1.16.0 --hash=sha256:" + strings.Repeat("0", 64) + "\n", ":2: six: the downloaded wheel's sha256 is none of the lock's hashes"},
		{"no such package", "six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\n" +
			"nsbox-no-such-package-zz==1.0 --hash=sha256:" + strings.Repeat("1", 64) + "\n", ":2: nsbox-no-such-package-zz: no wheel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := writeLock(t, tc.lock)
			_, err := Build(context.Background(), Options{Python: hostPython, Lock: lock, Out: out})
			var le *LockError
			if err == nil || !strings.HasPrefix(err.Error(), lock+tc.want) || !errors.As(err, &le) {
				t.Errorf("Build: %v\nwant %s%s...", err, lock, tc.want)
			}
			if r, err := rootfs.Verify(out); err != nil || !r.OK() || len(siblings(t, out)) > 0 {
				t.Errorf("previous root: %+v, %v, left %v", r, err, siblings(t, out))
			}
			if _, err := os.Stat(filepath.Join(out, rootfs.MetaDir, rootfs.LockFile)); !errors.Is(err, os.ErrNotExist) {
				t.Error("the previous stdlib-only root gained a lock file")
			}
		})
	}
}
