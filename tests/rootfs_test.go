package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/result"
)

// rootsDir is where the built-in roots live (NSBOX_ROOTS_DIR or the
// default), shared by every test run on the host.
func rootsDir() string {
	if d := os.Getenv("NSBOX_ROOTS_DIR"); d != "" {
		return d
	}
	return "/var/lib/nsbox/roots"
}

// TestRootHasOnlyTheRoot: the program runs the root's own interpreter from
// its venv, and nothing of the host outside the root is there: no shell,
// no coreutils, no /etc/shadow; os.system finds nothing to run.
func TestRootHasOnlyTheRoot(t *testing.T) {
	needRoot(t)
	code := `
import os, sys, shutil, json
print(json.dumps({
    "executable": sys.executable, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
    "sh": os.path.lexists("/bin/sh"), "usr_bin": sorted(os.listdir("/usr/bin")),
    "shadow": os.path.lexists("/etc/shadow"), "which_sh": shutil.which("sh"),
    "system": os.system("echo escaped"), "root": sorted(os.listdir("/")),
}))
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	var got struct {
		Executable, Prefix, BasePrefix string
		Sh, Shadow                     bool
		UsrBin, Root                   []string
		WhichSh                        *string `json:"which_sh"`
		System                         int
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(o.res.Stdout)), &got); err != nil {
		t.Fatalf("output %q: %v", o.res.Stdout, err)
	}
	if got.Executable != "/venv/bin/python" || got.Prefix != "/venv" {
		t.Errorf("sys.executable %q prefix %q: want the root's venv", got.Executable, got.Prefix)
	}
	if got.Sh || got.Shadow || got.WhichSh != nil || got.System == 0 {
		t.Errorf("host files visible: /bin/sh %v, /etc/shadow %v, which sh %v, os.system %d", got.Sh, got.Shadow, got.WhichSh, got.System)
	}
	for _, name := range got.UsrBin {
		if !strings.HasPrefix(name, "python") {
			t.Errorf("/usr/bin/%s in the root: only the interpreter belongs there", name)
		}
	}
	if strings.Contains(o.res.Stdout, "escaped") {
		t.Error("os.system ran a shell")
	}
}

// copyRoot copies the shared base root into a temp dir for a test that
// changes it.
func copyRoot(t *testing.T) string {
	t.Helper()
	// Make sure base exists (built on first use).
	runPy(t, "default", "pass").wantStatus(t, result.StatusOK)
	dst := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", filepath.Join(rootsDir(), "base")+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy base root: %v\n%s", err, out)
	}
	return dst
}

// rootPolicy writes a default policy running on root with the verify level.
func rootPolicy(t *testing.T, root, verify string) string {
	return writePolicy(t, "default", map[string]string{`root = "base"`: `root = "` + root + `"`, `verify = "quick"`: `verify = "` + verify + `"`})
}

// TestTamperedRootRefused changes one standard-library file of a copy of
// the base root: `nsbox rootfs verify` names it, a verify = "full" run
// refuses the root, and a change to a critical file (the interpreter) is
// caught even by the quick check every run does.
func TestTamperedRootRefused(t *testing.T) {
	needRoot(t)
	root := copyRoot(t)
	full := rootPolicy(t, root, "full")
	runPy(t, full, "print('clean')").wantStatus(t, result.StatusOK)

	victim := filepath.Join(root, "usr/lib/python3.11/json/__init__.py")
	f, err := os.OpenFile(victim, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n# tampered\n")
	f.Close()

	v := nsbox(t, run{args: []string{"rootfs", "verify", root}})
	if v.exit != 1 || !bytes.Contains(append(v.stdout, v.stderr...), []byte("usr/lib/python3.11/json/__init__.py")) {
		t.Errorf("rootfs verify: exit %d, output %s%s; want exit 1 naming the file", v.exit, v.stdout, v.stderr)
	}
	o := runPy(t, full, "print('ran')")
	o.wantStatus(t, result.StatusSandboxError)
	if o.res.Error.Step != "rootfs" || !strings.Contains(o.res.Error.Message, "json/__init__.py") {
		t.Errorf("error %+v, want step rootfs naming the file", o.res.Error)
	}

	quick := rootPolicy(t, root, "quick")
	runPy(t, quick, "pass").wantStatus(t, result.StatusOK) // a non-critical file: only full catches it
	interp := filepath.Join(root, "usr/bin/python3.11")
	f, err = os.OpenFile(interp, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	o = runPy(t, quick, "print('ran')")
	o.wantStatus(t, result.StatusSandboxError)
	if o.res.Error.Step != "rootfs" || !strings.Contains(o.res.Error.Message, "python3.11") {
		t.Errorf("error %+v, want step rootfs naming the interpreter", o.res.Error)
	}
}

// TestDatasciRoot runs a pandas and matplotlib program on the datasci root
// (built by `make datasci`, which `make test` runs): it writes a PNG into
// /workspace, which the host then reads.
func TestDatasciRoot(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat(filepath.Join(rootsDir(), "datasci", ".nsbox")); err != nil {
		mustwork.Skip(t, "datasci root not built (make datasci): %v", err)
	}
	ws := sandboxWorkspace(t)
	code := `
import pandas as pd, numpy as np, matplotlib
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
print("SUM", int(df["y"].sum()), "BACKEND", matplotlib.get_backend())
ax = df.plot(x="x", y="y")
ax.figure.savefig("/workspace/plot.png")
`
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", "datasci", "--workspace", ws, "-c", code}})
	o.wantStatus(t, result.StatusOK)
	if !strings.Contains(strings.ToLower(o.res.Stdout), "sum 285 backend agg") {
		t.Errorf("stdout %q", o.res.Stdout)
	}
	png, err := os.ReadFile(filepath.Join(ws, "plot.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Errorf("plot.png: %d bytes, err %v; want a PNG", len(png), err)
	}
}
