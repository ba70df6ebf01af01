package build

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// siblings returns the names next to out that a build may leave: its
// temporary directories, and generations other than the current one.
func siblings(t *testing.T, out string) []string {
	t.Helper()
	cur, err := rootfs.Resolve(out)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		p := filepath.Join(filepath.Dir(out), e.Name())
		if strings.HasPrefix(e.Name(), filepath.Base(out)+".") && p != out+".lock" && p != cur && p != rootfs.GenerationLock(cur) {
			left = append(left, p)
		}
	}
	return left
}

// cancelAt is a Reporter that cancels the build when it reaches a step.
type cancelAt struct {
	Reporter
	step   string
	cancel context.CancelFunc
}

func (c cancelAt) Step(name string) {
	if name == c.step {
		c.cancel()
	}
}

// TestAtomicity: failed builds, early or midway, leave the previous root
// exactly as it was and nothing next to it; a successful one replaces it.
func TestAtomicity(t *testing.T) {
	needBuildHost(t)
	out := filepath.Join(t.TempDir(), "roots", "base")

	// A first build, with the JSON reporter.
	var progress bytes.Buffer
	if _, err := Build(context.Background(), Options{Python: hostPython, Out: out, Version: "1", Progress: NewJSONReporter(&progress)}); err != nil {
		t.Fatal(err)
	}
	checkJSONProgress(t, progress.Bytes())
	header, err := os.ReadFile(filepath.Join(out, rootfs.MetaDir, rootfs.HeaderFile))
	if err != nil {
		t.Fatal(err)
	}
	intact := func(t *testing.T) {
		t.Helper()
		now, err := os.ReadFile(filepath.Join(out, rootfs.MetaDir, rootfs.HeaderFile))
		if err != nil || !bytes.Equal(now, header) {
			t.Errorf("root replaced or damaged: %v", err)
		}
		if r, err := rootfs.Verify(out); err != nil || !r.OK() {
			t.Errorf("root no longer verifies: %+v, %v", r, err)
		}
		if left := siblings(t, out); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}

	t.Run("interpreter does not exist", func(t *testing.T) {
		_, err := Build(context.Background(), Options{Python: "/nonexistent/python3", Out: out})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
			t.Errorf("Build: %v", err)
		}
		intact(t)
	})
	t.Run("unpinned lock", func(t *testing.T) {
		lock := writeLock(t, "six>=1 --hash="+hashA+"\n")
		_, err := Build(context.Background(), Options{Python: hostPython, Lock: lock, Out: out})
		if err == nil || !strings.HasPrefix(err.Error(), lock+":1: six: ") {
			t.Errorf("Build: %v", err)
		}
		intact(t)
	})
	t.Run("no pip, midway", func(t *testing.T) {
		lock := writeLock(t, "six==1.16.0 --hash="+hashA+"\n")
		_, err := Build(context.Background(), Options{Python: hostPython, Lock: lock, Out: out, Pip: "/bin/false"})
		if err == nil || !strings.Contains(err.Error(), "no pip") {
			t.Errorf("Build: %v", err)
		}
		intact(t)
	})
	t.Run("cancelled while compiling", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rep := cancelAt{Reporter: NewQuietReporter(), step: "compile bytecode", cancel: cancel}
		_, err := Build(ctx, Options{Python: hostPython, Out: out, Progress: rep})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Build: %v", err)
		}
		intact(t)
	})
	t.Run("not a root", func(t *testing.T) {
		other := filepath.Join(filepath.Dir(out), "precious")
		if err := os.MkdirAll(other, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, "data"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(context.Background(), Options{Python: hostPython, Out: other})
		if err == nil || !strings.Contains(err.Error(), "not an nsbox root") {
			t.Errorf("Build over a non-root directory: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(other, "data")); string(b) != "keep" {
			t.Error("the directory was touched")
		}
		link := filepath.Join(filepath.Dir(out), "link")
		if err := os.Symlink(out, link); err != nil {
			t.Fatal(err)
		}
		if _, err := Build(context.Background(), Options{Python: hostPython, Out: link}); err == nil {
			t.Error("Build over a symlink: no error")
		}
		intact(t)
	})
	t.Run("rebuild replaces", func(t *testing.T) {
		// A stale temporary directory from a build that died is swept.
		stale := out + ".tmp-stale"
		if err := os.Mkdir(stale, 0o700); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(out, "marker")
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var tty bytes.Buffer
		m, err := Build(context.Background(), Options{Python: hostPython, Out: out, Version: "2", Progress: NewTTYReporter(&tty)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the previous root is still there: %v", err)
		}
		if m.NsboxVersion != "2" {
			t.Errorf("version %q", m.NsboxVersion)
		}
		if left := siblings(t, out); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
		text := tty.String()
		for _, want := range []string{"copy standard library ", " files ", " MiB", "done in ", "/venv/bin/python (Python 3.11.", "standard library only"} {
			if !strings.Contains(text, want) {
				t.Errorf("terminal progress lacks %q:\n%s", want, text)
			}
		}
		t.Logf("terminal progress:\n%s", text)
	})
}

// TestConcurrentBuilds: two builds of the same OUT at once take turns on
// OUT.lock; both succeed and the result is one intact root.
func TestConcurrentBuilds(t *testing.T) {
	needBuildHost(t)
	out := filepath.Join(t.TempDir(), "base")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = Build(context.Background(), Options{Python: hostPython, Out: out})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("build %d: %v", i, err)
		}
	}
	if r, err := rootfs.Verify(out); err != nil || !r.OK() {
		t.Errorf("Verify: %+v, %v", r, err)
	}
	if left := siblings(t, out); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// checkJSONProgress checks the JSON reporter's lines: steps, counts, and
// a final summary.
func checkJSONProgress(t *testing.T, data []byte) {
	t.Helper()
	var steps []string
	var last map[string]any
	counts := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case obj["step"] != nil:
			steps = append(steps, obj["step"].(string))
		case obj["files"] != nil && obj["done"] == nil:
			if obj["files"].(float64) <= 0 || obj["bytes"] == nil || len(obj) != 2 {
				t.Errorf("count line %q", sc.Text())
			}
			counts++
		}
		last = obj
	}
	if len(steps) < 8 || steps[0] != "inspect interpreter" || steps[1] != "copy standard library" || counts < 5 {
		t.Errorf("steps %v, %d count lines", steps, counts)
	}
	if last["done"] != true || last["python"] != "/venv/bin/python" || last["files"].(float64) < 1000 ||
		last["bytes"].(float64) < 1e7 || last["packages"] == nil || last["python_version"] == nil {
		t.Errorf("last line %v", last)
	}
}
