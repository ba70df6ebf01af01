package tests

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// copyExe copies the executable src to dir/name, mode mode.
func copyExe(t *testing.T, src, dir, name string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	p := filepath.Join(dir, name)
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestStandaloneInit: runs start the stand-alone init (nsbox-init) when it
// lies beside nsbox, trusted; without it, or with one that anyone but
// root could have changed, they re-execute nsbox and still work, and
// nsbox doctor says which and why.
func TestStandaloneInit(t *testing.T) {
	needRoot(t)
	beside := filepath.Join(filepath.Dir(nsboxBin), "nsbox-init")
	if _, err := os.Stat(beside); err != nil {
		t.Fatalf("%s: %v (make build builds it next to nsbox)", beside, err)
	}
	for _, tc := range []struct {
		name   string
		init   bool
		mode   os.FileMode
		doctor string
	}{
		{"beside", true, 0o755, "nsbox-init (built without cgo)"},
		{"absent", false, 0, "not used"},
		{"group-writable", true, 0o775, "writable by group or others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyExe(t, nsboxBin, dir, "nsbox", 0o755)
			if tc.init {
				copyExe(t, beside, dir, "nsbox-init", tc.mode)
			}
			bin := filepath.Join(dir, "nsbox")
			o := nsbox(t, run{args: []string{"run", "--json", "-c", "print(6*7)"}, binary: bin})
			o.wantStatus(t, result.StatusOK)
			if o.res.Stdout != "42\n" {
				t.Errorf("stdout %q", o.res.Stdout)
			}
			d := nsbox(t, run{args: []string{"doctor"}, binary: bin})
			line := ""
			for _, l := range strings.Split(string(d.stdout), "\n") {
				if strings.HasPrefix(l, "stand-alone init") {
					line = l
				}
			}
			if !strings.Contains(line, tc.doctor) {
				t.Errorf("doctor says %q, want it to say %q", line, tc.doctor)
			}
		})
	}
}
