package elfdeps

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
)

const (
	hostPython  = "/usr/bin/python3.11"
	hostDynload = "/usr/lib/python3.11/lib-dynload"
)

// needHost skips when the host lacks path (fails under NSBOX_MUST_WORK=1).
func needHost(tb testing.TB, path string) { tb.Helper(); mustwork.NeedPath(tb, path) }

func dynloadModules(tb testing.TB) []string {
	tb.Helper()
	mods, err := filepath.Glob(filepath.Join(hostDynload, "*.so"))
	if err != nil || len(mods) == 0 {
		tb.Fatalf("no modules in %s: %v", hostDynload, err)
	}
	return mods
}

// lddPaths runs ldd on file and returns the paths it reports, except the vDSO.
func lddPaths(t *testing.T, ldd, file string) []string {
	t.Helper()
	out, err := exec.Command(ldd, file).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", ldd, file, err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "not found") {
			t.Fatalf("ldd %s: %s", file, line)
		}
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		p, _, _ := strings.Cut(line, " (")
		if strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	return paths
}

// checkAgainstLdd asserts that every file ldd reports for file is, after
// symlink resolution, one of closure's.
func checkAgainstLdd(t *testing.T, file string, closure []string) {
	t.Helper()
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		t.Logf("no ldd, skipping the comparison: %v", err)
		return
	}
	real := map[string]bool{}
	for _, p := range closure {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatalf("closure member %s: %v", p, err)
		}
		real[r] = true
	}
	for _, p := range lddPaths(t, ldd, file) {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatalf("ldd path %s: %v", p, err)
		}
		if !real[r] {
			t.Errorf("%s: ldd loads %s (%s), not in closure %v", file, p, r, closure)
		}
	}
}

// numpyModule finds numpy's core extension module in the datasci root (make
// datasci, which make test runs) or in the benchmark's venv.
func numpyModule(tb testing.TB) string {
	tb.Helper()
	roots := os.Getenv("NSBOX_ROOTS_DIR")
	if roots == "" {
		roots = "/var/lib/nsbox/roots"
	}
	for _, sp := range []string{
		filepath.Join(roots, "datasci/venv/lib/python3.11/site-packages"),
		"../../bench/.venv-datasci/lib/python3.11/site-packages",
	} {
		if m, _ := filepath.Glob(filepath.Join(sp, "numpy/_core/_multiarray_umath.*.so")); len(m) > 0 {
			return m[0]
		}
	}
	mustwork.Skip(tb, "no numpy extension module (make datasci builds one)")
	return ""
}

// TestClosureNumpy resolves numpy's core extension module: its bundled
// OpenBLAS and libgfortran come from numpy.libs through a $ORIGIN RUNPATH,
// the rest from the system, exactly as ldd (the real loader) finds them.
func TestClosureNumpy(t *testing.T) {
	mod := numpyModule(t)
	got, err := Closure([]string{mod})
	if err != nil {
		t.Fatal(err)
	}
	bundled := 0
	for _, p := range got {
		if strings.Contains(p, "/numpy.libs/") {
			bundled++
		}
	}
	if bundled == 0 {
		t.Errorf("closure %v has nothing from numpy.libs ($ORIGIN RUNPATH not followed)", got)
	}
	checkAgainstLdd(t, mod, got)
}

func TestClosurePython(t *testing.T) {
	needHost(t, hostPython)
	got, err := Closure([]string{hostPython})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("closure: %v", got)
	if !slices.ContainsFunc(got, func(p string) bool { return filepath.Base(p) == "libc.so.6" }) {
		t.Errorf("no libc.so.6 in %v", got)
	}
	if !slices.Contains(got, "/lib64/ld-linux-x86-64.so.2") {
		t.Errorf("no /lib64/ld-linux-x86-64.so.2 in %v", got)
	}
	if slices.Contains(got, hostPython) {
		t.Errorf("closure contains its input")
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("not sorted and deduplicated: %v", got)
	}
	checkAgainstLdd(t, hostPython, got)
}

func TestClosureDynload(t *testing.T) {
	needHost(t, hostPython)
	for _, mod := range dynloadModules(t) {
		got, err := Closure([]string{mod})
		if err != nil {
			t.Errorf("%s: %v", mod, err)
			continue
		}
		checkAgainstLdd(t, mod, got)
	}
}

func TestClosureNotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script.py")
	if err := os.WriteFile(p, []byte("#!/usr/bin/python3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Closure([]string{p})
	if !errors.Is(err, ErrNotELF) || !strings.Contains(err.Error(), p) {
		t.Fatalf("got %v, want ErrNotELF naming %s", err, p)
	}
	_, err = Closure([]string{filepath.Join(t.TempDir(), "missing")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing input: got %v", err)
	}
}

func BenchmarkClosurePython(b *testing.B) {
	needHost(b, hostPython)
	files := append([]string{hostPython}, dynloadModules(b)...)
	for b.Loop() {
		if _, err := Closure(files); err != nil {
			b.Fatal(err)
		}
	}
}
