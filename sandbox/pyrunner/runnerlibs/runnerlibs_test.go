package runnerlibs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLockMatchesWheel(t *testing.T) {
	pin, data, err := Wheel()
	if err != nil {
		t.Fatal(err)
	}
	if pin.Name != Package || pin.Version == "" || len(data) == 0 {
		t.Fatalf("pin %+v, %d bytes", pin, len(data))
	}
}

func TestExtract(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "lib")
	if err := Extract(dst); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"RestrictedPython/transformer.py", "RestrictedPython/__init__.py", "LICENSE.txt"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "restrictedpython-9.0.dist-info")); err == nil {
		t.Error("the dist-info was extracted")
	}
	if err := Extract(dst); err == nil {
		t.Error("Extract into an existing directory: no error")
	}
}
