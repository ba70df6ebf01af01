package build

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// wheel is a pure-Python wheel a test writes: name, version, files (path
// in the wheel, content) and Requires-Dist lines.
type wheel struct {
	name, version string
	files         map[string]string
	requires      []string
}

// write writes w into dir as a wheel pip accepts (METADATA, WHEEL,
// RECORD) and returns its lock entry.
func (w wheel) write(t *testing.T, dir string) string {
	t.Helper()
	dist := strings.ReplaceAll(w.name, "-", "_")
	info := dist + "-" + w.version + ".dist-info/"
	meta := "Metadata-Version: 2.1\nName: " + w.name + "\nVersion: " + w.version + "\n"
	for _, r := range w.requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string]string{
		info + "METADATA": meta + "\n",
		info + "WHEEL":    "Wheel-Version: 1.0\nGenerator: nsbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	for p, c := range w.files {
		files[p] = c
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	slices.Sort(names)
	var record strings.Builder
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, p := range names {
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
		f, err := z.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(files[p])); err != nil {
			t.Fatal(err)
		}
	}
	record.WriteString(info + "RECORD,,\n")
	f, err := z.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, dist+"-"+w.version+"-py3-none-any.whl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return fmt.Sprintf("%s==%s \\\n    --hash=sha256:%s\n", w.name, w.version, hex.EncodeToString(sum[:]))
}

// offlineWheels makes pip install from dir only (PIP_NO_INDEX and
// PIP_FIND_LINKS reach pip, see pipEnvKeep).
func offlineWheels(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("PIP_NO_INDEX", "1")
	t.Setenv("PIP_FIND_LINKS", dir)
	return dir
}

var probe = wheel{name: "nsbox-layer-probe", version: "1.0", files: map[string]string{
	"nsbox_layer_probe/__init__.py": "VALUE = 42\n",
	"nsbox_layer_probe/data.txt":    "probe data\n",
}}

// buildChild builds a layered root from parent into dir/name with a lock
// of the given entries.
func buildChild(t *testing.T, parent, out string, entries ...string) (*rootfs.Manifest, error) {
	t.Helper()
	lock := writeLock(t, strings.Join(entries, ""))
	return Build(context.Background(), Options{From: parent, Lock: lock, Out: out, Version: "test"})
}

// TestLayeredRoot builds a root from the base root plus one wheel: every
// parent file shares its inode with the child's, the new package is in
// the child only, verify passes, the child imports the package, and a
// changed new file fails verify.
func TestLayeredRoot(t *testing.T) {
	parentGen, parentM := baseRoot(t)
	parent := filepath.Join(scratch, "base")
	wheels := offlineWheels(t)
	lock := probe.write(t, wheels)
	out := filepath.Join(scratch, "layered")
	start := time.Now()
	m, err := buildChild(t, parent, out, lock)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layered build from base with one wheel: %v", time.Since(start))
	gen, err := rootfs.Resolve(out)
	if err != nil {
		t.Fatal(err)
	}
	defer Remove(context.Background(), out, nil)

	// The manifest: the parent, the whole root's packages, the extra lock.
	head, err := rootfs.Check(parentGen)
	if err != nil {
		t.Fatal(err)
	}
	if m.Parent == nil || m.Parent.Path != parent || m.Parent.Generation != filepath.Base(parentGen) ||
		m.Parent.ManifestSHA256 != head.ManifestSHA256 || m.Parent.Name != "" {
		t.Errorf("manifest parent %+v, want %s %s %s", m.Parent, parent, filepath.Base(parentGen), head.ManifestSHA256)
	}
	if m.Lock == nil || !slices.Equal(m.Lock.Packages, []string{"nsbox-layer-probe==1.0"}) || m.Python != parentM.Python {
		t.Errorf("manifest lock %+v, python %+v", m.Lock, m.Python)
	}

	// Every file of the parent is in the child, as the same inode.
	var linked int
	walkRoot(t, parentGen, func(p string, fi fs.FileInfo) {
		if !fi.Mode().IsRegular() {
			return
		}
		cfi, err := os.Lstat(filepath.Join(gen, p))
		if err != nil {
			t.Errorf("parent file %s: not in the child: %v", p, err)
			return
		}
		if !os.SameFile(fi, cfi) {
			t.Errorf("parent file %s: the child's is another inode", p)
		}
		linked++
	})
	if linked < 1000 {
		t.Errorf("only %d files of the parent checked", linked)
	}
	// The new package, its pyc and its dist-info are new files.
	sp := "/venv/lib/python3.11/site-packages"
	for _, p := range []string{sp + "/nsbox_layer_probe/__init__.py", sp + "/nsbox_layer_probe/data.txt",
		sp + "/nsbox_layer_probe/__pycache__/__init__.cpython-311.pyc", sp + "/nsbox_layer_probe-1.0.dist-info/METADATA"} {
		fi, err := os.Lstat(filepath.Join(gen, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if _, err := os.Lstat(filepath.Join(parentGen, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is in the parent too (%v)", p, err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o644 || st.Uid != 0 || st.Nlink != 1 {
			t.Errorf("%s: mode %v, uid %d, %d links", p, fi.Mode(), st.Uid, st.Nlink)
		}
	}
	if _, err := os.Lstat(filepath.Join(gen, "/venv/bin/pip")); err == nil {
		t.Error("/venv/bin holds more than the interpreter")
	}

	// The child verifies; the parent is untouched.
	for _, dir := range []string{gen, parentGen} {
		rep, err := rootfs.Verify(dir)
		if err != nil || !rep.OK() {
			t.Errorf("verify %s: %+v, %v", dir, rep, err)
		}
	}

	// The child's interpreter imports the new package, from its pyc.
	cmd := exec.Command("/venv/bin/python", "-c", "import nsbox_layer_probe as p; print(p.VALUE, p.__spec__.cached)")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: gen, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir, cmd.Env = "/", []string{}
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "42 "+sp+"/nsbox_layer_probe/__pycache__/") {
		t.Errorf("import in the child: %q, %v", got, err)
	}

	// A changed new file fails the child's verify, not the parent's.
	if err := os.WriteFile(filepath.Join(gen, sp, "nsbox_layer_probe/data.txt"), []byte("probe DATA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := rootfs.Verify(gen)
	if err != nil || !slices.Equal(rep.Modified, []string{sp + "/nsbox_layer_probe/data.txt"}) {
		t.Errorf("verify after a change: %+v, %v", rep, err)
	}
}

// TestLayeredRefusals: what a layered build refuses, and removing a
// parent while its child exists.
func TestLayeredRefusals(t *testing.T) {
	_, _ = baseRoot(t)
	base := filepath.Join(scratch, "base")
	wheels := offlineWheels(t)
	dir := t.TempDir()
	probeLock := probe.write(t, wheels)
	mid := filepath.Join(dir, "mid")
	if _, err := buildChild(t, base, mid, probeLock); err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(dir, "child")
	refused := func(name, want string, entries ...string) {
		t.Helper()
		_, err := buildChild(t, mid, child, entries...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", name, err, want)
		}
		if _, err := os.Lstat(child); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a refused build left %s", name, child)
		}
	}

	// The parent's package at another version.
	v2 := probe
	v2.version = "2.0"
	refused("other version", "nsbox-layer-probe==2.0 is in the parent "+mid+" at 1.0; a child root cannot replace a parent's package", v2.write(t, wheels))
	// A new package shipping a file the parent has.
	clash := wheel{name: "clash", version: "1.0", files: map[string]string{"nsbox_layer_probe/__init__.py": "VALUE = 0\n"}}
	refused("same path", "clash==1.0 installs /venv/lib/python3.11/site-packages/nsbox_layer_probe/__init__.py, which the parent "+mid+" has already", clash.write(t, wheels))
	// A requirement neither the parent nor the lock meets.
	needy := wheel{name: "needy", version: "1.0", files: map[string]string{"needy.py": "import absent\n"}, requires: []string{"absent-dep>=1"}}
	refused("missing requirement", "needy 1.0 requires absent-dep", needy.write(t, wheels))
	// Another interpreter than the parent's.
	lock := writeLock(t, probeLock)
	if _, err := Build(context.Background(), Options{From: mid, Python: "/usr/bin/python3", Lock: lock, Out: child}); err == nil || !strings.Contains(err.Error(), "a layered root runs its parent's interpreter") {
		t.Errorf("other --python: %v", err)
	}

	// The parent's package at the same version is skipped; one met by the
	// parent satisfies pip check.
	user := wheel{name: "user", version: "1.0", files: map[string]string{"user.py": "import nsbox_layer_probe\n"}, requires: []string{"nsbox-layer-probe==1.0"}}
	steps := &stepRecorder{}
	m, err := Build(context.Background(), Options{From: mid, Lock: writeLock(t, probeLock+user.write(t, wheels)), Out: child, Progress: steps})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(steps.steps, "skip nsbox-layer-probe==1.0: the parent "+mid+" has it") {
		t.Errorf("no skip step: %q", steps.steps)
	}
	if !slices.Equal(m.Lock.Packages, []string{"nsbox-layer-probe==1.0", "user==1.0"}) || m.Parent.Path != mid {
		t.Errorf("child manifest %+v %+v", m.Lock, m.Parent)
	}
	if rep, err := rootfs.Verify(child); err != nil || !rep.OK() {
		t.Errorf("verify child: %+v, %v", rep, err)
	}

	// A parent file changed after the parent's build (same size and mode,
	// so the link step's lstat passes) fails the new child's verify: its
	// manifest has the parent's digest.
	data := "/venv/lib/python3.11/site-packages/nsbox_layer_probe/data.txt"
	if err := os.WriteFile(filepath.Join(mid, data), []byte("PROBE data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered")
	if _, err := buildChild(t, mid, tampered, user.write(t, wheels)); err != nil {
		t.Fatal(err)
	}
	if rep, err := rootfs.Verify(tampered); err != nil || !slices.Equal(rep.Modified, []string{data}) {
		t.Errorf("verify a child of a changed parent: %+v, %v", rep, err)
	}
	if err := Remove(context.Background(), tampered, nil); err != nil {
		t.Fatal(err)
	}

	// Removing: refused while a child names the root as its parent, or
	// while a run holds a generation.
	if err := Remove(context.Background(), mid, nil); err == nil || !strings.Contains(err.Error(), "mid is the parent of child (built from it): remove "+child+" first") {
		t.Errorf("remove the parent: %v", err)
	}
	held, err := rootfs.Hold(child)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(context.Background(), child, nil); err == nil || !strings.Contains(err.Error(), "a run holds its generation") {
		t.Errorf("remove a held root: %v", err)
	}
	held.Close()
	if err := Remove(context.Background(), child, nil); err != nil {
		t.Fatal(err)
	}
	if err := Remove(context.Background(), mid, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("left after removing: %q", left)
	}
	// The base root, whose generation mid linked from, is intact.
	if rep, err := rootfs.Verify(base); err != nil || !rep.OK() {
		t.Errorf("verify base: %+v, %v", rep, err)
	}
}

// TestLayeredOtherFileSystem: a child cannot be built on another file
// system than its parent (hard links do not cross one).
func TestLayeredOtherFileSystem(t *testing.T) {
	_, _ = baseRoot(t)
	other := "/dev/shm"
	var a, b syscall.Stat_t
	if syscall.Stat(scratch, &a) != nil || syscall.Stat(other, &b) != nil || a.Dev == b.Dev {
		t.Skip("no other file system at /dev/shm")
	}
	wheels := offlineWheels(t)
	out, err := os.MkdirTemp(other, "nsbox-layer-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(out)
	_, err = buildChild(t, filepath.Join(scratch, "base"), filepath.Join(out, "child"), probe.write(t, wheels))
	if err == nil || !strings.Contains(err.Error(), "is on another file system than the parent") {
		t.Errorf("build on another file system: %v", err)
	}
}

// stepRecorder is a Reporter that records the steps.
type stepRecorder struct{ steps []string }

func (r *stepRecorder) Step(name string) { r.steps = append(r.steps, name) }
func (*stepRecorder) Files(int, int64)   {}
func (*stepRecorder) Done(Result)        {}
