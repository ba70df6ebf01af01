package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitFileTrust: the stand-alone init is used only when root alone
// can have put it there; anything else is refused with the reason, and
// the run falls back to re-executing nsbox.
func TestInitFileTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create root-owned and foreign-owned files")
	}
	setup := func(t *testing.T, dirMode, fileMode os.FileMode, owner int) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "bin")
		if err := os.Mkdir(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, dirMode); err != nil { // past the umask
			t.Fatal(err)
		}
		p := filepath.Join(dir, InitBinary)
		if err := os.WriteFile(p, []byte("\x7fELF"), fileMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fileMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, owner, owner); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name              string
		dirMode, fileMode os.FileMode
		owner             int
		refused           string // "" when the file is used
	}{
		{"root only", 0o755, 0o755, 0, ""},
		{"other owner", 0o755, 0o755, 65534, "owned by uid 65534"},
		{"group-writable file", 0o755, 0o775, 0, "writable by group or others"},
		{"world-writable dir", 0o777, 0o755, 0, "writable by group or others"},
		{"not executable", 0o755, 0o644, 0, "not executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t, tc.dirMode, tc.fileMode, tc.owner)
			f, err := initFileIn(dir)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer f.Close()
				if f.Fd() < initFDMin {
					t.Errorf("fd %d, want >= %d", f.Fd(), initFDMin)
				}
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("accepted, want refused (%s)", tc.refused)
			}
			if !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q, want it to name %s and say %q", err, dir, tc.refused)
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		dir := setup(t, 0o755, 0o755, 0)
		p := filepath.Join(dir, InitBinary)
		os.Rename(p, p+".real")
		if err := os.Symlink(p+".real", p); err != nil {
			t.Fatal(err)
		}
		if f, err := initFileIn(dir); err == nil {
			f.Close()
			t.Error("a symlinked init was accepted")
		}
	})
	t.Run("missing", func(t *testing.T) {
		if f, err := initFileIn(t.TempDir()); err == nil {
			f.Close()
			t.Error("a missing init was accepted")
		}
	})
}
