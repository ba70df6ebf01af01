package hostfiles

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// tree builds a synthetic host under a temporary root. Entries are a path
// inside the root and either "->target" (a symlink), "/" (a directory) or
// file content.
func tree(t *testing.T, entries ...string) string {
	t.Helper()
	root := t.TempDir()
	for i := 0; i < len(entries); i += 2 {
		p, what := filepath.Join(root, entries[i]), entries[i+1]
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(what, "->"):
			err = os.Symlink(what[2:], p)
		case what == "/":
			err = os.Mkdir(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(what), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// debianLike is a merged-/usr layout with the chains seen on Debian 12.
func debianLike(t *testing.T) string {
	entries := []string{
		"/lib", "->usr/lib",
		"/lib64", "->usr/lib64",
		"/usr/lib64/ld-linux-x86-64.so.2", "->/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "\x7fELF",
		"/usr/lib/x86_64-linux-gnu/libz.so.1", "->libz.so.1.2.13",
		"/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "\x7fELF",
		"/usr/bin/python3.11", "#!",
		"/usr/bin/python3", "->python3.11",
		"/usr/local/bin/py", "->/usr/bin/python3",
		"/usr/lib/python3.11/os.py", "",
		"/usr/lib/python3.11/sitecustomize.py", "->/etc/python3.11/sitecustomize.py",
		"/etc/python3.11/sitecustomize.py", "",
		"/file", "",
		"/loop/a", "->b",
		"/loop/b", "->/loop/a",
		"/loop/self", "->self",
		"/dotdot", "->../../..//./usr/./bin/",
	}
	// /chain/c0 -> c1 -> ... -> c40 -> /file: 41 links in all.
	for i := range 41 {
		target := fmt.Sprintf("c%d", i+1)
		if i == 40 {
			target = "/file"
		}
		entries = append(entries, fmt.Sprintf("/chain/c%d", i), "->"+target)
	}
	return tree(t, entries...)
}

func TestMirror(t *testing.T) {
	root := debianLike(t)
	for _, tc := range []struct {
		path, real string
		dir        bool
		links      map[string]string
	}{
		{"/usr/bin/python3.11", "/usr/bin/python3.11", false, nil},
		{"/usr/bin/python3", "/usr/bin/python3.11", false, map[string]string{"/usr/bin/python3": "python3.11"}},
		{"/usr/local/bin/py", "/usr/bin/python3.11", false, map[string]string{
			"/usr/local/bin/py": "/usr/bin/python3", "/usr/bin/python3": "python3.11"}},
		{"/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", false, map[string]string{
			"/lib64":                          "usr/lib64",
			"/usr/lib64/ld-linux-x86-64.so.2": "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
			"/lib":                            "usr/lib"}},
		{"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", false, map[string]string{
			"/lib": "usr/lib", "/usr/lib/x86_64-linux-gnu/libz.so.1": "libz.so.1.2.13"}},
		// ".." applies to the real directory reached, as in the kernel.
		{"/lib/../bin/python3", "/usr/bin/python3.11", false, map[string]string{
			"/lib": "usr/lib", "/usr/bin/python3": "python3.11"}},
		{"//usr/./lib/python3.11/", "/usr/lib/python3.11", true, nil},
		{"/dotdot/python3.11", "/usr/bin/python3.11", false, map[string]string{"/dotdot": "../../..//./usr/./bin/"}},
		{"/", "/", true, nil},
	} {
		p := newPlanner(root)
		real, mode, err := p.mirror(tc.path)
		if err != nil {
			t.Errorf("mirror(%s): %v", tc.path, err)
			continue
		}
		if real != tc.real || mode.IsDir() != tc.dir {
			t.Errorf("mirror(%s) = %s (%v), want %s (dir %v)", tc.path, real, mode, tc.real, tc.dir)
		}
		if tc.links == nil {
			tc.links = map[string]string{}
		}
		if !maps.Equal(p.links, tc.links) {
			t.Errorf("mirror(%s) links %v, want %v", tc.path, p.links, tc.links)
		}
		if !maps.Equal(p.copies, map[string]bool{tc.real: tc.dir}) {
			t.Errorf("mirror(%s) copies %v", tc.path, p.copies)
		}
	}
}

func TestMirrorErrors(t *testing.T) {
	root := debianLike(t)
	for _, tc := range []struct {
		path  string
		errno error
		text  string
	}{
		{"/usr/bin/python9", syscall.ENOENT, "no such file or directory"},
		{"/lib/nope/libc.so.6", syscall.ENOENT, "/usr/lib/nope: no such file"},
		{"/file/x", syscall.ENOTDIR, "/file: not a directory"},
		{"/file/", syscall.ENOTDIR, "not a directory"},
		{"/usr/bin/python3/", syscall.ENOTDIR, "/usr/bin/python3.11: not a directory"},
		{"/loop/a", syscall.ELOOP, "too many levels of symbolic links"},
		{"/loop/self", syscall.ELOOP, "too many levels"},
		{"/chain/c0", syscall.ELOOP, "/chain/c40: too many levels"},
	} {
		_, _, err := newPlanner(root).mirror(tc.path)
		if !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("mirror(%s): got %v, want %v containing %q", tc.path, err, tc.errno, tc.text)
		}
	}
	// 40 links are allowed.
	if real, _, err := newPlanner(root).mirror("/chain/c1"); err != nil || real != "/file" {
		t.Errorf("mirror(/chain/c1) = %q, %v", real, err)
	}
	if _, _, err := newPlanner(root).mirror("usr/bin"); err == nil {
		t.Errorf("relative path accepted")
	}
}

func TestPlanDropsCovered(t *testing.T) {
	root := debianLike(t)
	p := newPlanner(root)
	for _, path := range []string{
		"/usr/bin/python3",
		"/lib/python3.11/os.py",            // under the dir bound next
		"/usr/lib/python3.11",              // brings os.py and the sitecustomize link
		"/lib/python3.11/sitecustomize.py", // its link lies in the bound dir, its target outside
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libz.so.1",
	} {
		if _, _, err := p.mirror(path); err != nil {
			t.Fatal(err)
		}
	}
	pl, err := p.plan("/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	wantCopies := []Copy{
		{"/etc/python3.11/sitecustomize.py", "/etc/python3.11/sitecustomize.py", false},
		{"/usr/bin/python3.11", "/usr/bin/python3.11", false},
		{"/usr/lib/python3.11", "/usr/lib/python3.11", true},
		{"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", false},
		{"/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", false},
	}
	wantLinks := []Symlink{
		{"/lib", "usr/lib"},
		{"/lib64", "usr/lib64"},
		{"/usr/bin/python3", "python3.11"},
		{"/usr/lib/x86_64-linux-gnu/libz.so.1", "libz.so.1.2.13"},
		{"/usr/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
	}
	if pl.Interpreter != "/usr/bin/python3" || !slices.Equal(pl.Copies, wantCopies) || !slices.Equal(pl.Symlinks, wantLinks) {
		t.Errorf("plan:\n got %+v\nwant copies %+v\n      links %+v", pl, wantCopies, wantLinks)
	}
	checkPlanShape(t, pl)
}

// checkPlanShape checks the invariants the builder relies on.
func checkPlanShape(t *testing.T, pl *Plan) {
	t.Helper()
	dirs := map[string]bool{}
	links := map[string]bool{}
	for _, b := range pl.Copies {
		if b.Dir {
			dirs[b.Dest] = true
		}
	}
	for _, l := range pl.Symlinks {
		links[l.Path] = true
	}
	under := func(path string, set map[string]bool) string {
		for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
			if set[d] {
				return d
			}
		}
		if path != "/" && set["/"] {
			return "/"
		}
		return ""
	}
	if !slices.IsSortedFunc(pl.Copies, func(a, b Copy) int { return strings.Compare(a.Dest, b.Dest) }) {
		t.Errorf("copies not sorted by Dest")
	}
	for i, b := range pl.Copies {
		if b.Source != b.Dest || !filepath.IsAbs(b.Dest) || (i > 0 && pl.Copies[i-1].Dest == b.Dest) {
			t.Errorf("bad or duplicate copy %+v", b)
		}
		if d := under(b.Dest, dirs); d != "" {
			t.Errorf("copy %s inside copied directory %s", b.Dest, d)
		}
		if d := under(b.Dest, links); d != "" || links[b.Dest] {
			t.Errorf("copy %s under or at symlink %s", b.Dest, d)
		}
	}
	created := map[string]bool{}
	for _, l := range pl.Symlinks {
		if d := under(l.Path, dirs); d != "" {
			t.Errorf("symlink %s inside bound directory %s", l.Path, d)
		}
		// Creation order: no parent goes through a link, created before or later.
		if d := under(l.Path, links); d != "" {
			t.Errorf("symlink %s under symlink %s", l.Path, d)
		}
		if created[l.Path] {
			t.Errorf("symlink %s twice", l.Path)
		}
		created[l.Path] = true
	}
}
