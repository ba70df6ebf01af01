package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
)

// Matplotlib's font cache, built with the datasci root
// (rootfs-builder/build/mplcache.go) and copied by the runner into the
// policy's MPLCONFIGDIR (runner/mplcache.py): importing pyplot builds no
// cache, so its fontconfig probe (a subprocess the audit hook refuses and
// reports) never runs.

// mplProgram draws and saves a figure, then prints whether matplotlib's
// fontconfig probe ran (its result is cached once it has: currsize 1),
// what the cache directory holds and whether the PNG was written.
const mplProgram = `import os
import matplotlib.pyplot as plt
plt.plot([1, 2])
plt.savefig("/workspace/a.png")
import matplotlib.font_manager as fm
print(fm._get_fontconfig_fonts.cache_info().currsize, sorted(os.listdir(os.environ["MPLCONFIGDIR"])),
      os.path.getsize("/workspace/a.png") > 1000)
`

// checkMplRun fails unless r is a clean run of mplProgram: ok, no
// violation, nothing on stderr (no warning of matplotlib's), no probe,
// the root's cache file and nothing else in MPLCONFIGDIR, a PNG.
func checkMplRun(t *testing.T, how string, r *result.Result) {
	t.Helper()
	if r.Status != result.StatusOK || len(r.Violations) != 0 || r.Stderr != "" {
		t.Errorf("%s: status %s %q, violations %+v, stderr %q", how, r.Status, r.Reason, r.Violations, r.Stderr)
	}
	if want := "0 [" + strings.Join(quoted(mplCacheFiles(t)), ", ") + "] True\n"; r.Stdout != want {
		t.Errorf("%s: stdout %q, want %q (no fontconfig probe, the root's cache, a PNG)", how, r.Stdout, want)
	}
}

// mplCacheFiles lists the cache files of the datasci root.
func mplCacheFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(rootsDir(), "datasci", pyrunner.MatplotlibCacheDir))
	if err != nil {
		t.Fatalf("the datasci root has no matplotlib font cache: %v", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func quoted(names []string) []string {
	var q []string
	for _, n := range names {
		q = append(q, "'"+n+"'")
	}
	return q
}

// TestMatplotlibFontCacheInRoot: the datasci root holds one font cache,
// listed in its manifest, whose every font path is a font file of the
// root (relative ones are relative to matplotlib's data directory), and
// `rootfs verify` passes.
func TestMatplotlibFontCacheInRoot(t *testing.T) {
	needRoot(t)
	needDatasci(t)
	root := filepath.Join(rootsDir(), "datasci")
	names := mplCacheFiles(t)
	if len(names) != 1 || !strings.HasPrefix(names[0], "fontlist-v") || !strings.HasSuffix(names[0], ".json") {
		t.Fatalf("%s holds %v, want one fontlist-vVERSION.json", pyrunner.MatplotlibCacheDir, names)
	}
	inRoot := pyrunner.MatplotlibCacheDir + "/" + names[0]
	m, err := rootfs.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Files, func(f rootfs.File) bool { return f.Path == inRoot && f.Type == rootfs.TypeFile }) {
		t.Errorf("%s is not in the root's manifest", inRoot)
	}
	data, err := os.ReadFile(filepath.Join(root, inRoot))
	if err != nil {
		t.Fatal(err)
	}
	var cache struct {
		TTF []struct{ Fname string } `json:"ttflist"`
		AFM []struct{ Fname string } `json:"afmlist"`
	}
	if err := json.Unmarshal(data, &cache); err != nil {
		t.Fatalf("%s: %v", inRoot, err)
	}
	if len(cache.TTF) == 0 {
		t.Errorf("%s lists no TrueType font", inRoot)
	}
	dataDir := "/venv/lib/python3.11/site-packages/matplotlib/mpl-data"
	for _, f := range append(cache.TTF, cache.AFM...) {
		p := f.Fname
		if !path.IsAbs(p) {
			p = dataDir + "/" + p
		}
		if path.Clean(p) != p {
			t.Errorf("font path %q: not clean", f.Fname)
			continue
		}
		if fi, err := os.Lstat(filepath.Join(root, p)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("font path %q: not a file of the root (%v)", f.Fname, err)
		}
	}
	if bytes.Contains(data, []byte(filepath.Dir(root))) {
		t.Errorf("%s names the host's roots directory", inRoot)
	}
	if o := nsbox(t, run{args: []string{"rootfs", "verify", root}}); o.exit != 0 {
		t.Errorf("rootfs verify: exit %d: %s%s", o.exit, o.stdout, o.stderr)
	}
}

// TestMatplotlibNoSubprocess: pyplot imported, a figure drawn and saved
// under the datasci policy, cold, in a session without preloads and in
// one preloading pyplot, and in a pooled sandbox: no violation, no
// warning, no font cache built; a cold run leaves only its figure in the
// workspace (matplotlib's directories are not there).
func TestMatplotlibNoSubprocess(t *testing.T) {
	needRoot(t)
	needDatasci(t)
	ws := sandboxWorkspace(t)
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", "datasci", "--workspace", ws, "-c", mplProgram}})
	checkMplRun(t, "cold", o.res)
	if entries, err := os.ReadDir(ws); err != nil || len(entries) != 1 || entries[0].Name() != "a.png" {
		t.Errorf("workspace after the run: %v %v, want only a.png", entries, err)
	}

	e := newSessionEnv(t)
	for _, c := range []struct {
		how  string
		warm bool
	}{{"session", false}, {"session preloading pyplot", true}} {
		var change = warmPlan(t, "datasci")
		if !c.warm {
			change = nil
		}
		s := e.open(t, "datasci", 0, change)
		r, err := s.Run(t.Context(), []byte(mplProgram), 0)
		if err != nil {
			t.Fatalf("%s: %v", c.how, err)
		}
		checkMplRun(t, c.how, r)
		s.Close()
	}
	e.noLeftovers(t)

	srv := startServe(t, "", "--policies", "datasci", "--pool", "1")
	srv.ready(t)
	checkMplRun(t, "pooled", pooledRun(t, srv, map[string]any{"policy": "datasci", "code": mplProgram}))
	if code := srv.stopAndWait(t); code != 0 {
		t.Errorf("nsbox serve exited %d", code)
	}
}
