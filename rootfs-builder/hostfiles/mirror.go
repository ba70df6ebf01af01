package hostfiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// maxSymlinks is the kernel's limit on symlinks followed in one path walk
// (MAXSYMLINKS, 40 since Linux 4.2).
const maxSymlinks = 40

// planner accumulates the symlinks and copies needed to mirror host paths.
type planner struct {
	root   string            // prefix of every host path: "" for the host, a test directory in tests
	stats  map[string]entry  // Lstat cache, by path inside root
	copies map[string]bool   // real path -> is a directory
	links  map[string]string // symlink path -> link text
}

// entry is the cached Lstat of one path.
type entry struct {
	mode   fs.FileMode
	target string // link text when mode is a symlink
	err    error  // a bare errno, without the path
}

func newPlanner(root string) *planner {
	return &planner{
		root:   root,
		stats:  map[string]entry{},
		copies: map[string]bool{},
		links:  map[string]string{},
	}
}

func (p *planner) lstat(path string) entry {
	if e, ok := p.stats[path]; ok {
		return e
	}
	var e entry
	fi, err := os.Lstat(p.root + path)
	if err == nil {
		e.mode = fi.Mode()
		if e.mode&fs.ModeSymlink != 0 {
			e.target, err = os.Readlink(p.root + path)
		}
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the caller names the path; drop the root prefix
	}
	e.err = err
	p.stats[path] = e
	return e
}

// mirror resolves path (see resolve) and records its symlinks and the copy
// of its real path, which it returns with its file mode.
func (p *planner) mirror(path string) (string, fs.FileMode, error) {
	real, mode, links, err := p.resolve(path)
	if err != nil {
		return "", 0, err
	}
	if err := p.record(real, mode, links); err != nil {
		return "", 0, err
	}
	return real, mode, nil
}

// record adds the symlinks met resolving a path and the copy of its real path.
func (p *planner) record(real string, mode fs.FileMode, links []Symlink) error {
	for _, l := range links {
		if old, ok := p.links[l.Path]; ok && old != l.Target {
			return fmt.Errorf("bug: symlink %s recorded with targets %q and %q", l.Path, old, l.Target)
		}
		p.links[l.Path] = l.Target
	}
	p.copies[real] = mode.IsDir()
	return nil
}

// resolve resolves the absolute path like the kernel does, one component at
// a time: "." is skipped, ".." goes to the parent of the real directory
// reached so far, and a symlink is noted (path and link text) and its text
// resolved in place of the component, relative targets from the link's
// directory, absolute ones from the root. It returns the real path reached,
// its file mode and the symlinks met, in order. Every such symlink's parent
// is a real directory, so links can be created in any order.
//
// Errors are a bare errno (ENOENT, ENOTDIR, ELOOP after maxSymlinks links)
// when path itself fails, or name the failing prefix otherwise.
func (p *planner) resolve(path string) (string, fs.FileMode, []Symlink, error) {
	if !filepath.IsAbs(path) {
		return "", 0, nil, errors.New("not an absolute path")
	}
	fail := func(at string, err error) (string, fs.FileMode, []Symlink, error) {
		if at != filepath.Clean(path) {
			err = fmt.Errorf("%s: %w", at, err)
		}
		return "", 0, nil, err
	}
	var links []Symlink
	cur, mode := "/", fs.ModeDir
	rest := path
	for {
		rest = strings.TrimLeft(rest, "/")
		if rest == "" {
			break
		}
		// more: a '/' follows the component, so it must be a directory.
		c, after, more := strings.Cut(rest, "/")
		rest = after
		switch c {
		case ".":
			continue
		case "..":
			cur, mode = filepath.Dir(cur), fs.ModeDir
			continue
		}
		next := filepath.Join(cur, c)
		e := p.lstat(next)
		if e.err != nil {
			return fail(next, e.err)
		}
		if e.mode&fs.ModeSymlink != 0 {
			if len(links) == maxSymlinks {
				return fail(next, syscall.ELOOP)
			}
			if e.target == "" {
				return fail(next, syscall.ENOENT)
			}
			links = append(links, Symlink{Path: next, Target: e.target})
			if strings.HasPrefix(e.target, "/") {
				cur = "/"
			}
			if more {
				rest = e.target + "/" + rest
			} else {
				rest = e.target
			}
			continue
		}
		if more && !e.mode.IsDir() {
			return fail(next, syscall.ENOTDIR)
		}
		cur, mode = next, e.mode
	}
	return cur, mode, links, nil
}

// covered reports whether path lies strictly inside a copied directory.
func (p *planner) covered(path string) bool {
	for d := path; d != "/"; {
		d = filepath.Dir(d)
		if p.copies[d] {
			return true
		}
	}
	return false
}

// plan returns the copies and symlinks, dropping what a copied directory
// already brings. Copies are sorted by Dest, symlinks by Path; as every link's
// parent is a real directory, that order is a valid creation order.
func (p *planner) plan(interpreter string) (*Plan, error) {
	pl := &Plan{Interpreter: interpreter}
	for dest, dir := range p.copies {
		if _, ok := p.links[dest]; ok {
			return nil, fmt.Errorf("bug: %s is both a symlink and a copy", dest)
		}
		if !p.covered(dest) {
			pl.Copies = append(pl.Copies, Copy{Source: dest, Dest: dest, Dir: dir})
		}
	}
	for path, target := range p.links {
		if !p.covered(path) {
			pl.Symlinks = append(pl.Symlinks, Symlink{Path: path, Target: target})
		}
	}
	// A link's parent directories are real; one that is also a link means
	// the host changed while we walked it.
	for _, l := range pl.Symlinks {
		for d := filepath.Dir(l.Path); d != "/"; d = filepath.Dir(d) {
			if _, ok := p.links[d]; ok {
				return nil, fmt.Errorf("bug: symlink %s lies under symlink %s", l.Path, d)
			}
		}
	}
	slices.SortFunc(pl.Copies, func(a, b Copy) int { return strings.Compare(a.Dest, b.Dest) })
	slices.SortFunc(pl.Symlinks, func(a, b Symlink) int { return strings.Compare(a.Path, b.Path) })
	return pl, nil
}
