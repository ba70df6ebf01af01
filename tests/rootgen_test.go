package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// heldRuns are runs of heldRunCode in progress.
type heldRuns struct {
	ws   []string
	outs []*outcome
	wg   sync.WaitGroup
}

// startHeldRuns starts n runs of heldRunCode under pol and waits until
// each has started.
func startHeldRuns(t *testing.T, pol string, n int) *heldRuns {
	t.Helper()
	return startHeldRunsIn(t, pol, n, run{}, nil)
}

// startHeldRunsIn is startHeldRuns with the state dir and audit log of in
// and, when flags is not nil, flags(i) added to run i's command line.
func startHeldRunsIn(t *testing.T, pol string, n int, in run, flags func(i int) []string) *heldRuns {
	t.Helper()
	h := &heldRuns{ws: make([]string, n), outs: make([]*outcome, n)}
	for i := range n {
		h.ws[i] = sandboxWorkspace(t)
		args := []string{"run", "--json", "--policy", pol, "--workspace", h.ws[i]}
		if flags != nil {
			args = append(args, flags(i)...)
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.outs[i] = nsbox(t, run{state: in.state, auditDB: in.auditDB, args: append(args, "-c", heldRunCode)})
		}()
	}
	for i := range n {
		if !waitFile(filepath.Join(h.ws[i], "started"), 30*time.Second) {
			h.wg.Wait()
			t.Fatalf("run %d never started: %+v", i, h.outs[i])
		}
	}
	return h
}

// finish lets the runs go on, waits for them, fails the test for each
// that lost anything or did not end ok, and returns how many did.
func (h *heldRuns) finish(t *testing.T) int {
	t.Helper()
	for _, ws := range h.ws {
		if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.wg.Wait()
	lost := 0
	for i, o := range h.outs {
		var r heldRun
		if err := json.Unmarshal([]byte(strings.TrimSpace(o.res.Stdout)), &r); err != nil {
			t.Errorf("run %d: status %s, output %q: %v", i, o.res.Status, o.res.Stdout, err)
			lost++
			continue
		}
		if !r.ok() || o.res.Status != result.StatusOK {
			t.Errorf("run %d across the rebuild: status %s, saw %+v", i, o.res.Status, r)
			lost++
		}
	}
	return lost
}

// rootPolicyLong is a default policy on root with a timeout that leaves
// room for heldRunCode's wait.
func rootPolicyLong(t *testing.T, root string) string {
	return writePolicy(t, "default", map[string]string{`root = "base"`: `root = "` + root + `"`, `timeout = "30s"`: `timeout = "60s"`})
}

// sweep runs `nsbox rootfs sweep out` and returns the generations it kept.
func sweep(t *testing.T, out string) []string {
	t.Helper()
	o := nsbox(t, run{args: []string{"rootfs", "sweep", out}})
	if o.exit != 0 {
		t.Fatalf("rootfs sweep: exit %d\n%s%s", o.exit, o.stdout, o.stderr)
	}
	var kept []string
	for _, l := range strings.Split(strings.TrimSpace(string(o.stdout)), "\n") {
		if k, ok := strings.CutPrefix(l, "kept "); ok {
			kept = append(kept, strings.SplitN(k, ":", 2)[0])
		}
	}
	return kept
}

// onlyCurrent fails the test unless the current generation of out is the
// only thing beside it (its lock and the builder's lock aside), and it
// verifies.
func onlyCurrent(t *testing.T, out string) {
	t.Helper()
	cur, err := filepath.EvalSymlinks(out)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(filepath.Dir(out), e.Name())
		if strings.HasPrefix(p, out+".") && p != cur && p != cur+".lock" && p != out+".lock" {
			t.Errorf("left beside %s: %s", out, p)
		}
	}
	if o := nsbox(t, run{args: []string{"rootfs", "verify", out}}); o.exit != 0 {
		t.Errorf("rootfs verify %s: exit %d\n%s%s", out, o.exit, o.stdout, o.stderr)
	}
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
	pol := rootPolicyLong(t, out)

	runs := startHeldRuns(t, pol, 5)
	before := generations(t, out)
	start := time.Now()
	buildRoot(t, "", out)
	rebuild := time.Since(start)
	during := generations(t, out)
	lost := runs.finish(t)
	t.Logf("%d of 5 runs lost their root across the rebuild (%v); generations before %v, after the rebuild %v", lost, rebuild, before, during)
	if rebuild > 20*time.Second {
		t.Errorf("the rebuild took %v: it waited for the runs", rebuild)
	}
	if t.Failed() {
		return
	}

	// The runs kept the old generation; now that they are gone, the next
	// sweep removes it and keeps only the current one.
	if len(during) != 2 {
		t.Errorf("generations while the runs held the old one: %v, want the old and the new", during)
	}
	if kept := sweep(t, out); len(kept) > 0 {
		t.Errorf("sweep after the runs ended kept %v", kept)
	}
	onlyCurrent(t, out)
	runPy(t, pol, "import decimal; print('ok')").wantStatus(t, result.StatusOK)
}

// TestLegacyRootConverted: a root in the layout of an older nsbox (built
// in place, a directory, no generations) is rebuilt while runs use it;
// runs of an older nsbox take no lock, and neither do runs on such a
// root. The rebuild renames it aside, so the runs keep everything, and a
// sweep keeps it for a day (it cannot know when those runs end).
func TestLegacyRootConverted(t *testing.T) {
	needRoot(t)
	mustHave(t, "/usr/bin/python3.11")
	out := filepath.Join(t.TempDir(), "root")
	buildRoot(t, "", out)
	gen, err := filepath.EvalSymlinks(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{os.Remove(out), os.Remove(gen + ".lock"), os.Rename(gen, out)} {
		if step != nil {
			t.Fatal(step)
		}
	}
	pol := rootPolicyLong(t, out)

	runs := startHeldRuns(t, pol, 3)
	buildRoot(t, "", out)
	if fi, err := os.Lstat(out); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s after the rebuild: %v, %v; want a symlink to a generation", out, fi, err)
	}
	during := generations(t, out)
	lost := runs.finish(t)
	t.Logf("%d of 3 runs on a root of the older layout lost it across the rebuild; generations after it %v", lost, during)
	if len(during) != 2 {
		t.Fatalf("generations after converting: %v, want the converted one and the new one", during)
	}
	kept := sweep(t, out)
	if len(kept) != 1 {
		t.Errorf("sweep kept %v, want the converted root", kept)
	}
	if _, err := os.Lstat(kept[0] + ".lock"); err == nil {
		t.Errorf("the converted root %s has a lock", kept[0])
	}
	if o := nsbox(t, run{args: []string{"rootfs", "verify", kept[0]}}); o.exit != 0 {
		t.Errorf("the converted root does not verify: %s%s", o.stdout, o.stderr)
	}
	runPy(t, pol, "import decimal; print('ok')").wantStatus(t, result.StatusOK)
}

// TestConcurrentRebuilds: three builds of one root at once, while runs use
// it, take turns; all succeed, the runs keep their generation, and the
// root ends as one complete generation.
func TestConcurrentRebuilds(t *testing.T) {
	needRoot(t)
	mustHave(t, "/usr/bin/python3.11")
	out := filepath.Join(t.TempDir(), "root")
	buildRoot(t, "", out)
	pol := rootPolicyLong(t, out)

	runs := startHeldRuns(t, pol, 2)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { buildRoot(t, "", out) })
	}
	wg.Wait()
	lost := runs.finish(t)
	t.Logf("%d of 2 runs lost their root across 3 concurrent rebuilds", lost)
	if kept := sweep(t, out); len(kept) > 0 {
		t.Errorf("sweep after the runs ended kept %v", kept)
	}
	onlyCurrent(t, out)
	runPy(t, pol, "import decimal; print('ok')").wantStatus(t, result.StatusOK)
}

// TestKilledRebuildNotInUse: a rebuild SIGKILLed half-way leaves the root
// naming its previous, complete generation, which runs keep using; the
// next build removes what the killed one left.
func TestKilledRebuildNotInUse(t *testing.T) {
	needRoot(t)
	mustHave(t, "/usr/bin/python3.11")
	out := filepath.Join(t.TempDir(), "root")
	buildRoot(t, "", out)
	gen, err := filepath.EvalSymlinks(out)
	if err != nil {
		t.Fatal(err)
	}
	pol := rootPolicyLong(t, out)
	runs := startHeldRuns(t, pol, 2)

	for _, step := range []string{"copy standard library", "compile bytecode", "write manifest"} {
		cmd := exec.Command(nsboxBin, "rootfs", "build", "--json", "--python", "/usr/bin/python3.11", "--out", out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		reached := false
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.Contains(sc.Text(), `"`+step+`"`) {
				reached = true
				break
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if !reached {
			t.Fatalf("the build never reached %q; it wrote:\n%s\n%s", step, strings.Join(seen, "\n"), stderr.String())
		}
		// Killed at the last step, the build may have switched already;
		// either way the root names a complete generation.
		if now, err := filepath.EvalSymlinks(out); err != nil || now != gen && step != "write manifest" {
			t.Errorf("killed at %q: the root names %q (%v), want the previous generation %s", step, now, err, gen)
		}
		if o := nsbox(t, run{args: []string{"rootfs", "verify", out}}); o.exit != 0 {
			t.Errorf("killed at %q: the root does not verify: %s%s", step, o.stdout, o.stderr)
		}
		if m, _ := filepath.Glob(out + ".tmp-*"); len(m) == 0 {
			t.Logf("killed at %q: nothing left to sweep", step)
		}
		runPy(t, pol, "import decimal; print('ok')").wantStatus(t, result.StatusOK)
	}
	if lost := runs.finish(t); lost > 0 {
		t.Errorf("%d runs lost their root to killed builds", lost)
	}
	buildRoot(t, "", out)
	if kept := sweep(t, out); len(kept) > 0 {
		t.Errorf("sweep kept %v", kept)
	}
	onlyCurrent(t, out)
}
