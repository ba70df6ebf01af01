package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// buildRoot runs `nsbox rootfs build` of a standard-library root into out
// with binary (nsboxBin when "") and fails the test if it fails.
func buildRoot(t *testing.T, binary, out string) {
	t.Helper()
	if binary == "" {
		binary = nsboxBin
	}
	cmd := exec.Command(binary, "rootfs", "build", "--json", "--python", "/usr/bin/python3.11", "--out", out)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", out, err, o)
	}
}

// heldRunCode is a run that outlives a rebuild of its root: it writes a
// file into /workspace and says it started, waits (bounded) until the host
// drops "go" into its workspace or its /workspace stops being the mount
// it was, then reports what it still has: its file, /proc, imports of
// modules it had not loaded yet.
const heldRunCode = `
import os, sys, time, json
open('/workspace/mine', 'w').write('x')
def dev(p):
    try:
        return os.stat(p).st_dev
    except OSError as e:
        return repr(e)
ws0, proc0 = dev('/workspace'), dev('/proc')
open('/workspace/started', 'w').write('1')
deadline = time.monotonic() + 40
while time.monotonic() < deadline:
    if os.path.exists('/workspace/go') or dev('/workspace') != ws0:
        break
    time.sleep(0.05)
out = {'go': os.path.exists('/workspace/go'), 'workspace': os.path.exists('/workspace/mine'),
       'workspace_same': dev('/workspace') == ws0, 'proc_same': dev('/proc') == proc0}
try:
    out['proc'] = open('/proc/self/status').read().startswith('Name:')
except OSError as e:
    out['proc'] = repr(e)
try:
    import decimal, fractions, statistics, csv, email.parser, xml.dom.minidom
    out['imports'] = True
except Exception as e:
    out['imports'] = repr(e)
print(json.dumps(out))
`

// heldRun is what one heldRunCode run reported.
type heldRun struct {
	Go            bool `json:"go"`
	Workspace     bool `json:"workspace"`
	WorkspaceSame bool `json:"workspace_same"`
	ProcSame      bool `json:"proc_same"`
	Proc          any  `json:"proc"`
	Imports       any  `json:"imports"`
}

func (h heldRun) ok() bool {
	return h.Go && h.Workspace && h.WorkspaceSame && h.ProcSame && h.Proc == true && h.Imports == true
}

// generations lists the generation directories of the root at out.
func generations(t *testing.T, out string) []string {
	t.Helper()
	m, err := filepath.Glob(out + ".gen-*")
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, p := range m {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			gens = append(gens, p)
		}
	}
	return gens
}

// TestRebuildKeepsRunningSandboxes rebuilds a root while five runs use it.
// Each run keeps its /workspace and /proc and can still import modules
// after the rebuild, and finishes ok; the rebuild does not wait for them.
// Their generation is kept while they run and removed by the next sweep
// once they have ended.
func TestRebuildKeepsRunningSandboxes(t *testing.T) {
	needRoot(t)
	mustHave(t, "/usr/bin/python3.11")
	out := filepath.Join(t.TempDir(), "root")
	buildRoot(t, "", out)
	pol := writePolicy(t, "default", map[string]string{`root = "base"`: `root = "` + out + `"`, `timeout = "30s"`: `timeout = "60s"`})

	const n = 5
	ws := make([]string, n)
	outs := make([]*outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		ws[i] = sandboxWorkspace(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = nsbox(t, run{args: []string{"run", "--json", "--policy", pol, "--workspace", ws[i], "-c", heldRunCode}})
		}()
	}
	for i := range n {
		if !waitFile(filepath.Join(ws[i], "started"), 30*time.Second) {
			wg.Wait()
			t.Fatalf("run %d never started: %+v", i, outs[i])
		}
	}
	before := generations(t, out)

	start := time.Now()
	buildRoot(t, "", out)
	rebuild := time.Since(start)
	for i := range n {
		if err := os.WriteFile(filepath.Join(ws[i], "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	during := generations(t, out)
	wg.Wait()
	if rebuild > 20*time.Second {
		t.Errorf("the rebuild took %v: it waited for the runs", rebuild)
	}

	lost := 0
	for i, o := range outs {
		var h heldRun
		if err := json.Unmarshal([]byte(strings.TrimSpace(o.res.Stdout)), &h); err != nil {
			t.Errorf("run %d: status %s, output %q: %v", i, o.res.Status, o.res.Stdout, err)
			lost++
			continue
		}
		if !h.ok() || o.res.Status != result.StatusOK {
			t.Errorf("run %d across the rebuild: status %s, saw %+v", i, o.res.Status, h)
			lost++
		}
	}
	t.Logf("%d of %d runs lost their root across the rebuild; generations before %v, after the rebuild %v", lost, n, before, during)
	if t.Failed() {
		return
	}

	// The runs kept the old generation; now that they are gone, the next
	// sweep removes it and keeps only the current one.
	if len(during) != 2 {
		t.Errorf("generations while the runs held the old one: %v, want the old and the new", during)
	}
	if o := nsbox(t, run{args: []string{"rootfs", "sweep", out}}); o.exit != 0 {
		t.Fatalf("rootfs sweep: exit %d\n%s%s", o.exit, o.stdout, o.stderr)
	}
	after := generations(t, out)
	cur, err := filepath.EvalSymlinks(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0] != cur {
		t.Errorf("generations after the runs ended and a sweep: %v, want only the current %s", after, cur)
	}
	for _, g := range during {
		if g != cur {
			if _, err := os.Lstat(g + ".lock"); err == nil {
				t.Errorf("the lock of removed generation %s is left", g)
			}
		}
	}
	runPy(t, pol, "import decimal; print('ok')").wantStatus(t, result.StatusOK)
}
