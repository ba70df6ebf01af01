package build

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/rootfs-builder/elfdeps"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

const hostPython = "/usr/bin/python3.11"

var (
	scratch  string // holds the shared base root; removed after the tests
	baseOnce sync.Once
	baseDir  string
	baseM    *rootfs.Manifest
	baseErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nsbox-build-test-")
	if err != nil {
		panic(err)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needBuildHost skips (or fails, see mustwork) where a root cannot be
// built: not root (every file of a root is owned by root), or no host
// interpreter.
func needBuildHost(tb testing.TB) {
	tb.Helper()
	mustwork.NeedRoot(tb)
	mustwork.NeedPath(tb, hostPython)
}

// baseRoot builds the stdlib-only root from the host's python3.11 once
// for the package, and returns its generation's directory.
func baseRoot(t *testing.T) (string, *rootfs.Manifest) {
	t.Helper()
	needBuildHost(t)
	baseOnce.Do(func() {
		out := filepath.Join(scratch, "base")
		baseM, baseErr = Build(context.Background(), Options{Python: hostPython, Out: out, Version: "test"})
		if baseErr == nil {
			baseDir, baseErr = rootfs.Resolve(out)
		}
	})
	if baseErr != nil {
		t.Fatalf("build base root: %v", baseErr)
	}
	return baseDir, baseM
}

func TestBaseLayout(t *testing.T) {
	dir, m := baseRoot(t)
	in := func(p string) string { return filepath.Join(dir, p) }
	exists := func(p string) bool { _, err := os.Lstat(in(p)); return err == nil }

	version, err := exec.Command(hostPython, "-c", "import platform; print(platform.python_version())").Output()
	if err != nil {
		t.Fatal(err)
	}
	if m.Python.Path != "/venv/bin/python" || m.Python.Version != strings.TrimSpace(string(version)) ||
		m.Python.Host != hostPython || m.Lock != nil || m.NsboxVersion != "test" || m.Format != rootfs.FormatVersion {
		t.Errorf("manifest head: %+v %+v", m.Python, m.Lock)
	}

	// The interpreter at its host path, the venv pointing at it.
	for _, p := range []string{"/usr/bin/python3.11", "/usr/lib/python3.11/os.py", "/usr/lib/python3.11/unittest/__init__.py",
		"/usr/lib/python3.11/lib-dynload", "/usr/lib/python3.11/venv/__init__.py", "/venv/lib/python3.11/site-packages"} {
		if !exists(p) {
			t.Errorf("%s missing", p)
		}
	}
	if target, err := os.Readlink(in("/venv/bin/python")); err != nil || target != hostPython {
		t.Errorf("/venv/bin/python -> %q, %v", target, err)
	}
	cfg, err := os.ReadFile(in("/venv/pyvenv.cfg"))
	if err != nil || !strings.Contains(string(cfg), "home = /usr/bin\n") || !strings.Contains(string(cfg), "include-system-site-packages = false\n") {
		t.Errorf("pyvenv.cfg %q, %v", cfg, err)
	}
	if entries, _ := os.ReadDir(in("/venv/lib/python3.11/site-packages")); len(entries) != 0 {
		t.Errorf("site-packages of a stdlib-only root holds %d entries", len(entries))
	}
	// The usr-merged symlinks the loader path goes through.
	if target, _ := os.Readlink(in("/lib64")); target != "usr/lib64" {
		t.Errorf("/lib64 -> %q", target)
	}

	// Left out: test suites, GUI, pip bootstrap, build support, Debian's
	// additions.
	for _, p := range []string{"/usr/lib/python3.11/test", "/usr/lib/python3.11/idlelib", "/usr/lib/python3.11/tkinter",
		"/usr/lib/python3.11/turtledemo", "/usr/lib/python3.11/turtle.py", "/usr/lib/python3.11/ensurepip",
		"/usr/lib/python3.11/unittest/test", "/usr/lib/python3.11/lib2to3/tests", "/usr/lib/python3.11/distutils/tests",
		"/usr/lib/python3.11/ctypes/test", "/usr/lib/python3.11/sqlite3/test", "/usr/lib/python3.11/dist-packages",
		"/usr/lib/python3.11/sitecustomize.py", "/usr/lib/python3.11/config-3.11-x86_64-linux-gnu", "/usr/lib/python3",
		"/usr/local", "/etc/python3.11", "/etc/shadow", "/root", "/home"} {
		if exists(p) {
			t.Errorf("%s is in the root", p)
		}
	}
	if err := filepath.WalkDir(in("/usr/lib/python3.11"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "test" || d.Name() == "tests" || d.Name() == "idle_test") {
			t.Errorf("test suite %s in the root", strings.TrimPrefix(p, dir))
		}
		if strings.HasPrefix(d.Name(), "_test") && strings.HasSuffix(d.Name(), ".so") {
			t.Errorf("test module %s in the root", strings.TrimPrefix(p, dir))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// /etc and the mount points.
	passwd, _ := os.ReadFile(in("/etc/passwd"))
	for _, want := range []string{"root:x:0:0:", "sandbox:x:1000:1000:sandbox:/workspace:/usr/sbin/nologin\n", "nobody:x:65534:65534:"} {
		if !strings.Contains(string(passwd), want) {
			t.Errorf("/etc/passwd lacks %q:\n%s", want, passwd)
		}
	}
	for f, want := range map[string]string{"/etc/group": "sandbox:x:1000:", "/etc/hosts": "127.0.0.1\tlocalhost",
		"/etc/nsswitch.conf": "hosts: files", "/etc/hostname": "nsbox\n"} {
		if b, _ := os.ReadFile(in(f)); !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q: %q", f, want, b)
		}
	}
	if b, _ := os.ReadFile(in("/etc/hosts")); !strings.Contains(string(b), "::1\tlocalhost") {
		t.Errorf("/etc/hosts has no IPv6 localhost: %q", b)
	}
	for _, d := range []string{"/dev", "/proc", "/tmp", "/workspace"} {
		fi, err := os.Lstat(in(d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("mount point %s: %v, %v", d, fi, err)
			continue
		}
		if entries, _ := os.ReadDir(in(d)); len(entries) != 0 {
			t.Errorf("mount point %s is not empty", d)
		}
	}
}

// TestNoShell: nothing to run but the interpreter. Bin directories hold
// only it (and links to it), and the only executable files are ELF
// objects: no script can be started through its #! line.
func TestNoShell(t *testing.T) {
	dir, _ := baseRoot(t)
	for _, p := range []string{"/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/env", "/bin/ls", "/usr/bin/ls", "/usr/bin/busybox", "/sbin/ldconfig"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s is in the root", p)
		}
	}
	for _, bin := range binDirs {
		entries, err := os.ReadDir(filepath.Join(dir, bin))
		if err != nil {
			continue
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if bin != "/usr/bin" || !slices.Equal(names, []string{"python3.11"}) {
			t.Errorf("%s holds %v", bin, names)
		}
	}
	walkRoot(t, dir, func(p string, fi fs.FileInfo) {
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s owned by %d:%d", p, st.Uid, st.Gid)
		}
		mode := fi.Mode()
		switch {
		case mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
			t.Errorf("%s has mode %v", p, mode)
		case mode.IsDir() && mode.Perm() != 0o755:
			t.Errorf("directory %s has mode %v", p, mode)
		case mode.IsRegular() && mode.Perm() != 0o644 && mode.Perm() != 0o755:
			t.Errorf("file %s has mode %v", p, mode)
		case mode.IsRegular() && mode.Perm() == 0o755:
			if ok, _ := isELF(filepath.Join(dir, p)); !ok {
				t.Errorf("executable %s is not an ELF object", p)
			}
		}
	})
}

// TestBytecode: every .py has an unchecked-hash pyc (flags 0b01 in the
// header: hash-based, source not checked) naming its path inside the
// root.
func TestBytecode(t *testing.T) {
	dir, _ := baseRoot(t)
	b := &builder{root: dir, py: pyInfo{CacheTag: "cpython-311"}}
	n := 0
	walkRoot(t, dir, func(p string, fi fs.FileInfo) {
		if !strings.HasSuffix(p, ".py") {
			return
		}
		n++
		data, err := os.ReadFile(filepath.Join(dir, b.pycPath(p)))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return
		}
		if flags := binary.LittleEndian.Uint32(data[4:8]); flags != 1 {
			t.Errorf("%s: pyc flags %#b, want 0b1 (unchecked hash)", p, flags)
		}
	})
	if n < 500 {
		t.Errorf("only %d .py files", n)
	}
	// The code object names the path inside the root, not the build dir.
	pyc, err := os.ReadFile(filepath.Join(dir, "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(pyc, []byte("/usr/lib/python3.11/os.py")) || bytes.Contains(pyc, []byte(".tmp-")) {
		t.Error("os.pyc does not name /usr/lib/python3.11/os.py, or names the build directory")
	}
}

// TestManifestComplete: the manifest lists every path, Check and Verify
// pass, and the header's critical files are the ones a run needs.
func TestManifestComplete(t *testing.T) {
	dir, m := baseRoot(t)
	var want []string
	walkRoot(t, dir, func(p string, _ fs.FileInfo) { want = append(want, p) })
	slices.Sort(want)
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("manifest lists %d paths, the root has %d", len(got), len(want))
	}
	h, err := rootfs.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	var critical []string
	for _, c := range h.Critical {
		critical = append(critical, c.Path)
	}
	for _, p := range []string{"/venv/bin/python", "/venv/pyvenv.cfg", "/usr/bin/python3.11", "/lib64", "/usr/lib64/ld-linux-x86-64.so.2",
		"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/lib", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/python3.11/os.py",
		"/usr/lib/python3.11/site.py", "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc", "/usr", "/usr/lib"} {
		if !slices.Contains(critical, p) {
			t.Errorf("%s is not critical; critical: %v", p, critical)
		}
	}
	if h.Python.Path != "/venv/bin/python" {
		t.Errorf("header python %+v", h.Python)
	}
	if r, err := rootfs.Verify(dir); err != nil || !r.OK() {
		t.Errorf("Verify: %+v, %v", r, err)
	}
}

// TestELFClosureInRoot: every ELF object in the root finds every library
// it needs inside the root, asked of the root's own loader (ld.so --list,
// chrooted); and the host closure elfdeps computes for the interpreter
// and lib-dynload resolves inside the root.
func TestELFClosureInRoot(t *testing.T) {
	dir, _ := baseRoot(t)
	var elfs []string
	walkRoot(t, dir, func(p string, fi fs.FileInfo) {
		if ok, _ := isELF(filepath.Join(dir, p)); ok && fi.Mode().IsRegular() {
			elfs = append(elfs, p)
		}
	})
	const loader = "/lib64/ld-linux-x86-64.so.2"
	for _, p := range elfs {
		if path.Base(p) == "ld-linux-x86-64.so.2" {
			continue
		}
		cmd := exec.Command(loader, "--list", p)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
		cmd.Dir = "/"
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil || bytes.Contains(out, []byte("not found")) {
			t.Errorf("ld.so --list %s in the root: %v\n%s", p, err, out)
		}
		if p == hostPython && !bytes.Contains(out, []byte("libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6")) {
			t.Errorf("ld.so --list %s in the root: no libc\n%s", p, out)
		}
	}
	if len(elfs) < 60 {
		t.Errorf("only %d ELF files", len(elfs))
	}

	mods, err := filepath.Glob("/usr/lib/python3.11/lib-dynload/*.so")
	if err != nil {
		t.Fatal(err)
	}
	mods = slices.DeleteFunc(mods, func(m string) bool { return !keepStdlib("lib-dynload/"+path.Base(m), false) })
	libs, err := elfdeps.Closure(append(mods, hostPython))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		if _, _, err := resolveInRoot(dir, l); err != nil {
			t.Errorf("library %s: %v", l, err)
		}
	}
}

// TestRunsInRoot runs the root's interpreter chrooted into the root as
// the sandbox user with an empty environment: it is a venv, finds its
// libraries and modules there, and has nothing to run.
func TestRunsInRoot(t *testing.T) {
	dir, m := baseRoot(t)
	script := `import json, os, pwd, shutil, socket, subprocess, sys
import ssl, sqlite3, ctypes, decimal, lzma, bz2, zlib, hashlib, unittest, asyncio, uuid, readline, curses
missing = []
for name in ("test", "idlelib", "tkinter", "ensurepip", "turtle"):
    try:
        __import__(name)
    except ImportError:
        missing.append(name)
try:
    subprocess.run(["ls"])
    ls = "ran"
except FileNotFoundError:
    ls = "not found"
print(json.dumps({
    "prefix": sys.prefix, "base_prefix": sys.base_prefix, "path": sys.path,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "user": pwd.getpwuid(os.getuid()).pw_name, "home": pwd.getpwuid(os.getuid()).pw_dir,
    "localhost": socket.gethostbyname("localhost"),
    "which_sh": shutil.which("sh"), "system": os.system("true"), "ls": ls,
    "missing": missing, "json_pyc": json.__spec__.cached, "os_frozen": os.__spec__.origin,
}))`
	cmd := exec.Command("/venv/bin/python", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir = "/"
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python in the root: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	var r struct {
		Prefix     string   `json:"prefix"`
		BasePrefix string   `json:"base_prefix"`
		Path       []string `json:"path"`
		Version    string   `json:"version"`
		User       string   `json:"user"`
		Home       string   `json:"home"`
		Localhost  string   `json:"localhost"`
		WhichSh    *string  `json:"which_sh"`
		System     int      `json:"system"`
		Ls         string   `json:"ls"`
		Missing    []string `json:"missing"`
		JSONPyc    string   `json:"json_pyc"`
		OsFrozen   string   `json:"os_frozen"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Prefix != "/venv" || r.BasePrefix != "/usr" {
		t.Errorf("prefix %q, base prefix %q: not a venv", r.Prefix, r.BasePrefix)
	}
	if !slices.Contains(r.Path, "/venv/lib/python3.11/site-packages") || slices.ContainsFunc(r.Path, func(p string) bool { return strings.Contains(p, "dist-packages") }) {
		t.Errorf("sys.path %v", r.Path)
	}
	if r.Version != m.Python.Version || r.User != "sandbox" || r.Home != "/workspace" || r.Localhost != "127.0.0.1" {
		t.Errorf("%+v", r)
	}
	if r.WhichSh != nil || r.System == 0 || r.Ls != "not found" {
		t.Errorf("something to run: which sh %v, os.system %d, ls %s", r.WhichSh, r.System, r.Ls)
	}
	if !slices.Equal(r.Missing, []string{"test", "idlelib", "tkinter", "ensurepip", "turtle"}) {
		t.Errorf("importable: missing only %v", r.Missing)
	}
	// os is frozen into the 3.11 interpreter; json comes from its pyc.
	if r.JSONPyc != "/usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc" || r.OsFrozen != "frozen" {
		t.Errorf("json loaded from %q, os from %q", r.JSONPyc, r.OsFrozen)
	}
}

// walkRoot calls fn with the path inside the root and the lstat of every
// entry under dir except the metadata.
func walkRoot(t *testing.T, dir string, fn func(p string, fi fs.FileInfo)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel := strings.TrimPrefix(p, dir)
		if rel == "/"+rootfs.MetaDir {
			return fs.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fn(rel, fi)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckLoadableCatchesMissing: a library missing from the root makes
// the build's loader check fail, naming the object and the library.
func TestCheckLoadableCatchesMissing(t *testing.T) {
	dir, _ := baseRoot(t)
	clone := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", dir+"/.", clone).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	b := &builder{ctx: context.Background(), o: Options{Python: hostPython}, root: clone}
	if err := b.checkLoadable(); err != nil {
		t.Fatalf("intact root: %v", err)
	}
	if err := os.Remove(filepath.Join(clone, "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13")); err != nil {
		t.Fatal(err)
	}
	err := b.checkLoadable()
	if err == nil || !strings.Contains(err.Error(), "libz.so.1") || !strings.Contains(err.Error(), "in the root") {
		t.Errorf("root without libz: %v", err)
	}
	t.Log(err)
}
