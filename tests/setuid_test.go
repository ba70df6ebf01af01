package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// setuidAttack tries every way a program has to put a setuid or setgid
// bit on a file it owns: chmod, fchmod, open and mknod with such a mode.
// In an idmapped --workspace, the file is its owner's on the host, and a
// setuid one would run as that owner for whoever executes it. Harmless if
// uncontained: the files are empty, in the test's own directory.
const setuidAttack = `
import os, stat
def attempt(name, f):
    try:
        f()
        print(name, "OK")
    except OSError as e:
        print(name, e.__class__.__name__)
open("/workspace/f", "w").close()
fd = os.open("/workspace/f", os.O_RDONLY)
attempt("chmod-suid", lambda: os.chmod("/workspace/f", 0o4755))
attempt("chmod-sgid", lambda: os.chmod("/workspace/f", 0o2755))
attempt("fchmod-both", lambda: os.fchmod(fd, 0o6755))
attempt("open-suid", lambda: os.close(os.open("/workspace/g", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mknod-suid", lambda: os.mknod("/workspace/h", stat.S_IFREG | 0o4755))
os.mkdir("/workspace/d")
attempt("chmod-sgid-dir", lambda: os.chmod("/workspace/d", 0o2775))
attempt("chmod-plain", lambda: os.chmod("/workspace/f", 0o755))
`

// TestNoSetuidInWorkspace: under every built-in policy, with the Python
// layer off, no setuid or setgid bit reaches a file the program makes in
// an idmapped --workspace; ordinary modes still work.
func TestNoSetuidInWorkspace(t *testing.T) {
	needRoot(t)
	const uid, gid = 4321, 4322
	for _, policy := range []string{"permissive", "default", "strict"} {
		t.Run(policy, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(ws, uid, gid); err != nil {
				t.Fatal(err)
			}
			pol := policy
			if policy != "permissive" {
				pol = osOnly(t, policy)
			}
			o := runPyLayer(t, pol, setuidAttack, "--workspace", ws)
			o.wantStatus(t, result.StatusOK)
			for _, want := range []string{"chmod-suid PermissionError", "chmod-sgid PermissionError",
				"fchmod-both PermissionError", "open-suid PermissionError", "chmod-sgid-dir PermissionError", "chmod-plain OK"} {
				if !strings.Contains(o.res.Stdout, want+"\n") {
					t.Errorf("stdout lacks %q:\n%s", want, o.res.Stdout)
				}
			}
			if strings.Contains(o.res.Stdout, "mknod-suid OK") {
				t.Errorf("mknod made a setuid file:\n%s", o.res.Stdout)
			}
			err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
					t.Errorf("host: %s has mode %v", p, fi.Mode())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			o.noLeftovers(t)
		})
	}
}
