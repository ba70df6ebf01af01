package roots

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenErrors: a datasci root that was never built names the command
// that builds it; a path that is not a root names the path.
func TestOpenErrors(t *testing.T) {
	t.Setenv("NSBOX_ROOTS_DIR", t.TempDir())
	_, err := Open("datasci", false)
	if err == nil || !strings.Contains(err.Error(), "make datasci") {
		t.Errorf("datasci not built: %v, want the make target named", err)
	}
	dir := filepath.Join(t.TempDir(), "not-a-root")
	os.Mkdir(dir, 0o755)
	_, err = Open(dir, false)
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("not a root: %v, want the path named", err)
	}
	// A root from another nsbox: its runner is missing, and the error says
	// how to rebuild it.
	e := &NotBuiltError{Name: "/srv/root", Dir: "/srv/root", OldRunner: true}
	if msg := e.Error(); !strings.Contains(msg, "nsbox rootfs build") || !strings.Contains(msg, "/srv/root") {
		t.Errorf("old runner: %q, want the rebuild command and the path", msg)
	}
}
