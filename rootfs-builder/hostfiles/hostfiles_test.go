package hostfiles

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/rootfs-builder/elfdeps"
)

const (
	hostPython = "/usr/bin/python3.11"
	hostStdlib = "/usr/lib/python3.11"
)

// needHost skips when the host lacks path (fails under NSBOX_MUST_WORK=1).
func needHost(tb testing.TB, path string) { tb.Helper(); mustwork.NeedPath(tb, path) }

// resolveInPlan resolves path inside the planned root: through the plan's
// symlinks, into its copies, and below a copied directory through the host's
// own entries (the copy brings them). It returns the host real path reached.
func resolveInPlan(t *testing.T, pl *Plan, path string) string {
	t.Helper()
	links := map[string]string{}
	for _, l := range pl.Symlinks {
		links[l.Path] = l.Target
	}
	copies := map[string]bool{}
	for _, b := range pl.Copies {
		copies[b.Dest] = b.Dir
	}
	// The builder creates the parent directories of every copy and symlink.
	made := map[string]bool{}
	for _, p := range slices.Concat(slices.Collect(maps.Keys(copies)), slices.Collect(maps.Keys(links))) {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			made[d] = true
		}
	}
	inCopy := func(p string) bool {
		for d := p; ; d = filepath.Dir(d) {
			if dir, ok := copies[d]; ok && (dir || d == p) {
				return true
			}
			if d == "/" {
				return false
			}
		}
	}
	cur, rest := "/", strings.Split(path, "/")
	for n := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		target, isLink := links[next]
		if !isLink && inCopy(next) {
			fi, err := os.Lstat(next)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, next, err)
			}
			if isLink = fi.Mode()&fs.ModeSymlink != 0; isLink {
				target, _ = os.Readlink(next)
			}
		} else if !isLink && made[next] {
			cur = next
			continue
		} else if !isLink {
			t.Fatalf("%s: %s is neither bound nor a symlink in the plan", path, next)
		}
		if isLink {
			if n++; n > 40 {
				t.Fatalf("%s: symlink loop", path)
			}
			if strings.HasPrefix(target, "/") {
				cur = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		cur = next
	}
	return cur
}

func TestNewPython(t *testing.T) {
	needHost(t, hostPython)
	pl, err := New(hostPython, []string{hostStdlib})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d copies, %d symlinks", len(pl.Copies), len(pl.Symlinks))
	for _, b := range pl.Copies {
		t.Logf("copy %s dir=%v", b.Dest, b.Dir)
	}
	for _, l := range pl.Symlinks {
		t.Logf("symlink %s -> %s", l.Path, l.Target)
	}
	checkPlanShape(t, pl)

	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []Copy{{hostPython, hostPython, false}, {hostStdlib, hostStdlib, true}, {libc, libc, false}} {
		if !slices.Contains(pl.Copies, want) {
			t.Errorf("no copy %+v", want)
		}
	}
	if target, err := os.Readlink("/lib64"); err == nil && !slices.Contains(pl.Symlinks, Symlink{"/lib64", target}) {
		t.Errorf("no symlink /lib64 -> %s", target)
	}

	// Every file the loader opens resolves inside the root to the same file
	// as on the host, through the recreated symlinks.
	mods, err := filepath.Glob(hostStdlib + "/lib-dynload/*.so")
	if err != nil {
		t.Fatal(err)
	}
	libs, err := elfdeps.Closure(append([]string{hostPython}, mods...))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(libs, "/lib64/ld-linux-x86-64.so.2") {
		t.Errorf("loader missing from %v", libs)
	}
	for _, p := range slices.Concat([]string{hostPython}, libs, mods) {
		want, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := resolveInPlan(t, pl, p); got != want {
			t.Errorf("%s resolves inside to %s, on the host to %s", p, got, want)
		}
	}
}

func TestNewPythonSymlink(t *testing.T) {
	needHost(t, hostPython)
	const interp = "/usr/bin/python3"
	target, err := os.Readlink(interp)
	if err != nil {
		t.Skipf("%s is not a symlink here: %v", interp, err)
	}
	pl, err := New(interp, []string{hostStdlib})
	if err != nil {
		t.Fatal(err)
	}
	checkPlanShape(t, pl)
	want, err := filepath.EvalSymlinks(interp)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Interpreter != interp || !slices.Contains(pl.Symlinks, Symlink{interp, target}) || resolveInPlan(t, pl, interp) != want {
		t.Errorf("interpreter %s -> %s not mirrored: %+v", interp, target, pl)
	}
}

func TestNewErrors(t *testing.T) {
	needHost(t, hostPython)
	for _, tc := range []struct {
		interp string
		paths  []string
		text   string
		is     error
	}{
		{"/usr/bin/python9", nil, "interpreter /usr/bin/python9: no such file", fs.ErrNotExist},
		{"python3", nil, `interpreter "python3": not an absolute path`, nil},
		{"/etc/passwd", nil, "interpreter /etc/passwd: not executable", nil},
		{"/usr/bin", nil, "interpreter /usr/bin: not a regular file", nil},
		{hostPython, []string{"lib"}, `host path "lib": not an absolute path`, nil},
		{hostPython, []string{"/nonexistent/dir"}, "host path /nonexistent/dir: /nonexistent: no such file", fs.ErrNotExist},
	} {
		_, err := New(tc.interp, tc.paths)
		if err == nil || !strings.Contains(err.Error(), tc.text) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("New(%q, %q): got %v, want %q", tc.interp, tc.paths, err, tc.text)
		}
	}
}

func TestModulesSynthetic(t *testing.T) {
	root := tree(t,
		"/std/lib-dynload/_a.so", "\x7fELF",
		"/std/lib-dynload/_b.cpython-311.so", "\x7fELF",
		"/std/config/libpython.so", "->../../lib/libpython.so.1",
		"/lib/libpython.so.1", "\x7fELF",
		"/std/dangling.so", "->/nowhere.so",
		"/std/script.so.py", "print()",
		"/std/os.py", "\x7fELF",
		"/std/dir.so", "/",
	)
	p := newPlanner(root)
	real, mode, err := p.mirror("/std")
	if err != nil {
		t.Fatal(err)
	}
	mods, err := p.modules(real, mode)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/std/config/libpython.so", "/std/lib-dynload/_a.so", "/std/lib-dynload/_b.cpython-311.so"}
	if !slices.Equal(mods, want) {
		t.Errorf("modules = %q, want %q", mods, want)
	}
	pl, err := p.plan("/bin/python")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pl.Copies, Copy{"/lib/libpython.so.1", "/lib/libpython.so.1", false}) || len(pl.Symlinks) != 0 {
		t.Errorf("symlinked module target not mirrored: %+v", pl)
	}
}

func BenchmarkNewPython(b *testing.B) {
	needHost(b, hostPython)
	for b.Loop() {
		if _, err := New(hostPython, []string{hostStdlib}); err != nil {
			b.Fatal(err)
		}
	}
}
