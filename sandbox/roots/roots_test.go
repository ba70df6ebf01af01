package roots

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/policies"
)

// TestBaseBuiltOnceOnFirstUse: three concurrent first uses of base in an
// empty roots directory build it once and all get the same checked root.
func TestBaseBuiltOnceOnFirstUse(t *testing.T) {
	mustwork.NeedRoot(t)
	mustwork.NeedPath(t, BasePython)
	t.Setenv("NSBOX_ROOTS_DIR", t.TempDir())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var logs strings.Builder
	errs := make([]error, 3)
	paths := make([]string, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var log strings.Builder
			r, err := Open(context.Background(), "base", Options{Verify: policies.VerifyQuick, Version: "test", Log: &log})
			errs[i] = err
			if err == nil {
				paths[i] = r.Header.Python.Path
			}
			mu.Lock()
			logs.WriteString(log.String())
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if paths[i] != "/venv/bin/python" {
			t.Errorf("open %d: interpreter %q", i, paths[i])
		}
	}
	if n := strings.Count(logs.String(), "building the base root"); n != 1 {
		t.Errorf("base built %d times, want once:\n%s", n, logs.String())
	}
	if _, err := Open(context.Background(), "base", Options{Verify: policies.VerifyFull}); err != nil {
		t.Errorf("full verification of a fresh base: %v", err)
	}
}

// TestOpenErrors: a datasci root that was never built names the command
// that builds it; a path that is not a root names the path.
func TestOpenErrors(t *testing.T) {
	t.Setenv("NSBOX_ROOTS_DIR", t.TempDir())
	_, err := Open(context.Background(), "datasci", Options{Verify: policies.VerifyQuick})
	if err == nil || !strings.Contains(err.Error(), "make datasci") {
		t.Errorf("datasci not built: %v, want the make target named", err)
	}
	dir := filepath.Join(t.TempDir(), "not-a-root")
	os.Mkdir(dir, 0o755)
	_, err = Open(context.Background(), dir, Options{Verify: policies.VerifyQuick})
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("not a root: %v, want the path named", err)
	}
}
