package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tinyRoot writes a small tree with a manifest whose critical file is
// /bin/tool, and returns its directory.
func tinyRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "a-b"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "a"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin/tool"), []byte("#tool\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a/b"), []byte("ab"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "a-b/c"), []byte("c"), 0o644))
	must(os.Symlink("bin/tool", filepath.Join(dir, "link")))
	for _, p := range []string{dir, filepath.Join(dir, "bin"), filepath.Join(dir, "a"), filepath.Join(dir, "a-b")} {
		must(os.Chmod(p, 0o755)) // whatever the umask
	}
	must(os.Chmod(filepath.Join(dir, "bin/tool"), 0o755))
	must(os.Chmod(filepath.Join(dir, "a/b"), 0o644))
	must(os.Chmod(filepath.Join(dir, "a-b/c"), 0o644))
	files, err := Scan(dir)
	must(err)
	m := &Manifest{Format: FormatVersion, NsboxVersion: "test", BuiltAt: time.Unix(0, 0).UTC(),
		Python: Python{Path: "/link", Version: "3.0.0", Host: "/x"}, Files: files}
	_, err = Write(dir, m, []string{"/bin", "/bin/tool", "/link"})
	must(err)
	return dir
}

func TestScanOrderAndKinds(t *testing.T) {
	dir := tinyRoot(t)
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	// "/a-b" sorts before "/a/b" as a string, unlike WalkDir's order.
	want := []string{"/a", "/a-b", "/a-b/c", "/a/b", "/bin", "/bin/tool", "/link"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	byPath := map[string]File{}
	for _, f := range m.Files {
		byPath[f.Path] = f
	}
	if f := byPath["/link"]; f.Type != TypeSymlink || f.Target != "bin/tool" || f.Size != 8 || f.SHA256 != "" {
		t.Errorf("symlink entry %+v", f)
	}
	sum := sha256.Sum256([]byte("#tool\n"))
	if f := byPath["/bin/tool"]; f.Type != TypeFile || f.Mode != 0o755 || f.Size != 6 || f.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("file entry %+v", f)
	}
	if f := byPath["/a"]; f.Type != TypeDir || f.Mode != 0o755 || f.Size != 0 {
		t.Errorf("dir entry %+v", f)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaDir, LockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock.txt without a lock: %v", err)
	}
}

func TestCheckAndVerifyTiny(t *testing.T) {
	dir := tinyRoot(t)
	h, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h.Python.Path != "/link" || len(h.Critical) != 3 || h.Critical[1].SHA256 != "" {
		t.Errorf("header %+v", h)
	}
	if r, err := Verify(dir); err != nil || !r.OK() {
		t.Fatalf("fresh root: %+v, %v", r, err)
	}

	// A same-size edit of a non-critical file: only Verify sees it.
	if err := os.WriteFile(filepath.Join(dir, "a/b"), []byte("XY"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(dir); err != nil {
		t.Errorf("Check after a non-critical edit: %v", err)
	}
	// A setuid bit on the critical file: Check sees the mode.
	if err := os.Chmod(filepath.Join(dir, "bin/tool"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	_, err = Check(dir)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "/bin/tool") || !strings.Contains(err.Error(), "mode 4755") {
		t.Errorf("Check after setuid: %v", err)
	}
	r, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Modified, []string{"/a/b", "/bin/tool"}) || len(r.Missing)+len(r.Extra) != 0 {
		t.Errorf("report %+v", r)
	}
	// Another file in the metadata directory is extra.
	if err := os.WriteFile(filepath.Join(dir, MetaDir, "note"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, _ := Verify(dir); !slices.Equal(r.Extra, []string{"/.nsbox/note"}) {
		t.Errorf("extra %v", r.Extra)
	}
}

func TestCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   string
	}{
		{"no header", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, MetaDir, HeaderFile))
		}, "root.json: no such file"},
		{"manifest edited", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, MetaDir, ManifestFile), " ")
		}, "manifest.json has sha256"},
		{"symlink retargeted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "link"))
			os.Symlink("/bin/tool", filepath.Join(dir, "link"))
		}, `/link: points to "/bin/tool"`},
		{"critical dir replaced by a symlink", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "bin"), filepath.Join(dir, "elsewhere"))
			os.Symlink("elsewhere", filepath.Join(dir, "bin"))
		}, "/bin: is a symlink, the manifest says dir"},
		{"critical file removed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "bin/tool"))
		}, "critical file /bin/tool: lstat"},
		{"bad format", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, MetaDir, HeaderFile), `"format": 1`, `"format": 7`)
		}, "format 7"},
		{"critical path escapes", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, MetaDir, HeaderFile), `"path": "/bin/tool"`, `"path": "/../../etc/shadow"`)
		}, "not an absolute clean path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tinyRoot(t)
			tc.break_(t, dir)
			_, err := Check(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("Check: %v; want an error naming %s and containing %q", err, dir, tc.want)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	dir := tinyRoot(t)
	rewrite(t, filepath.Join(dir, MetaDir, ManifestFile), `{"path":"/a-b"`, `{"path":"/zz"`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not sorted") {
		t.Errorf("unsorted manifest: %v", err)
	}
	if _, err := Verify(dir); err == nil {
		t.Error("Verify of an unreadable manifest: no error")
	}
}

func TestWriteRefuses(t *testing.T) {
	dir := tinyRoot(t)
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(t.TempDir(), m, []string{"/nope"}); err == nil || !strings.Contains(err.Error(), "/nope is not in the manifest") {
		t.Errorf("unknown critical path: %v", err)
	}
	if _, err := Write(dir, m, nil); err == nil {
		t.Error("Write over existing metadata: no error")
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s lacks %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
