package build

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestRemoveSettlingOutlastsWriter: a writer that keeps adding files for a
// while (a killed build's last compileall worker) does not make the sweep
// fail; once it stops, the directory is gone.
func TestRemoveSettlingOutlastsWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root.tmp-1")
	sub := filepath.Join(dir, "usr", "lib", "python3.11")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	start := make(chan struct{})
	go func() {
		defer wg.Done()
		<-start
		end := time.Now().Add(300 * time.Millisecond)
		for i := 0; time.Now().Before(end); i++ {
			// As compileall's worker does: the directory may be gone
			// already; recreate it and write on.
			os.MkdirAll(sub, 0o755)
			os.WriteFile(filepath.Join(sub, strconv.Itoa(i)+".pyc"), nil, 0o644)
		}
	}()
	close(start)
	err := removeSettling(dir)
	wg.Wait()
	if err != nil {
		t.Fatalf("removeSettling: %v", err)
	}
	// The writer may have recreated it after the last removal: a sweep
	// runs after the writer died, so do it once more, as the next build's
	// would, and it must then be gone.
	if err := removeSettling(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", dir, err)
	}
}
