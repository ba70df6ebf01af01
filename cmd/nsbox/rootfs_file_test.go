package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/roots"
)

func TestReadRootFile(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "myroot.toml")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	from, name, lock, err := readRootFile(write("from = \"datasci\"\nlock = \"extra.lock\"\n"))
	if err != nil || from != roots.Path("datasci") || name != "datasci" || lock != filepath.Join(dir, "extra.lock") {
		t.Errorf("built-in parent: %q %q %q %v", from, name, lock, err)
	}
	from, name, lock, err = readRootFile(write("from = \"roots/mine\"\nlock = \"/abs/extra.lock\"\n"))
	if err != nil || from != filepath.Join(dir, "roots/mine") || name != "" || lock != "/abs/extra.lock" {
		t.Errorf("parent path: %q %q %q %v", from, name, lock, err)
	}
	for content, want := range map[string]string{
		"from = \"datasci\"\n": "no lock",
		"lock = \"x.lock\"\n":  "no from",
		"from = \"datasci\"\nlock = \"x\"\npython = \"/usr/bin/python3\"\n": "unknown key python",
		"from = [\n": "myroot.toml",
	} {
		if _, _, _, err := readRootFile(write(content)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
}

// TestRootfsRootFile builds a base root, then a layered root from it
// declared in a root file with one wheel the test writes (pip offline),
// and removes them: the parent only after the child.
func TestRootfsRootFile(t *testing.T) {
	mustwork.NeedRoot(t)
	mustwork.NeedPath(t, "/usr/bin/python3.11")
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if out, errOut, code := runRootfs(t, "build", "--python", "/usr/bin/python3.11", "--out", base); code != 0 {
		t.Fatalf("build base: exit %d\n%s\n%s", code, out, errOut)
	}
	wheels := t.TempDir()
	t.Setenv("PIP_NO_INDEX", "1")
	t.Setenv("PIP_FIND_LINKS", wheels)
	entry := writeTestWheel(t, wheels, "rootfile_probe", "1.0", "rootfile_probe.py", "OK = True\n")
	if err := os.WriteFile(filepath.Join(dir, "extra.lock"), []byte(entry), 0o644); err != nil {
		t.Fatal(err)
	}
	rf := filepath.Join(dir, "child.toml")
	// "base" is the built-in name: a path is given as ./base.
	if err := os.WriteFile(rf, []byte("from = \"./base\"\nlock = \"extra.lock\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(dir, "child")
	if out, errOut, code := runRootfs(t, "build", "--root-file", rf, "--from", base, "--out", child); code != 1 || !strings.Contains(out, "leave out --from and --lock") {
		t.Errorf("--root-file with --from: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := runRootfs(t, "build", "--root-file", rf, "--out", child)
	if code != 0 || !strings.Contains(out, `"packages":["rootfile_probe==1.0"]`) {
		t.Fatalf("build from the root file: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, code := runRootfs(t, "verify", child); code != 0 {
		t.Errorf("verify child: exit %d\n%s", code, out)
	}
	if _, _, code := runRootfs(t, "remove", base); code != 1 {
		t.Errorf("remove the parent of a root: exit %d", code)
	}
	for _, r := range []string{child, base} {
		if out, errOut, code := runRootfs(t, "remove", r); code != 0 || out != "removed "+r+"\n" {
			t.Errorf("remove %s: exit %d\n%s\n%s", r, code, out, errOut)
		}
		if _, err := os.Lstat(r); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", r, err)
		}
	}
}

// writeTestWheel writes a one-module pure-Python wheel into dir and
// returns its lock entry.
func writeTestWheel(t *testing.T, dir, name, version, module, code string) string {
	t.Helper()
	info := name + "-" + version + ".dist-info/"
	files := [][2]string{
		{module, code},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: nsbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(info + "RECORD,,\n")
	files = append(files, [2]string{info + "RECORD", record.String()})
	path := filepath.Join(dir, name+"-"+version+"-py3-none-any.whl")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(out)
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%s==%s \\\n    --hash=sha256:%s\n", name, version, hex.EncodeToString(sum[:]))
}
