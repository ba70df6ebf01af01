// Package elfdeps computes the set of files the Linux dynamic loader (glibc's
// ld.so) opens to start a set of ELF programs and shared objects: their
// program interpreter and their DT_NEEDED libraries, recursively.
//
// It reads only the ELF header, the program headers, PT_INTERP and the
// dynamic section, never section headers or symbols, and searches for
// libraries the way ld.so does:
//
//  1. a DT_NEEDED name containing '/' is used as a path;
//  2. DT_RPATH of the object, then of the objects that loaded it, unless the
//     object has DT_RUNPATH (an object's DT_RPATH is ignored when it also has
//     DT_RUNPATH);
//  3. DT_RUNPATH of the object (direct dependencies only);
//  4. the directories of /etc/ld.so.conf, then the built-in default
//     directories, unless the object is linked with -z nodeflib.
//
// $ORIGIN and $PLATFORM are expanded; elements using $LIB are skipped. A
// candidate counts only if it is an ELF object of the same class and machine.
//
// Not modelled: LD_LIBRARY_PATH and LD_PRELOAD (the sandbox clears the
// environment), /etc/ld.so.preload, the ld.so.cache file (its content is
// derived from ld.so.conf; a stale cache may differ), glibc-hwcaps
// subdirectories, empty search path elements (the current directory), the
// executable's DT_RPATH applying to objects it dlopens, and reuse of an
// already loaded object by SONAME. Each of these can only make ld.so open a
// file this package does not list; inside a sandbox that file is then absent
// and the loader falls back or fails visibly.
package elfdeps

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotFound reports a DT_NEEDED library that no search directory holds.
var ErrNotFound = errors.New("library not found")

// Closure returns every file the dynamic loader opens to start the given ELF
// files: their PT_INTERP and their DT_NEEDED libraries, recursively. Paths are
// as ld.so opens them (search directory + "/" + name, not symlink-resolved),
// sorted and deduplicated, without the inputs themselves.
//
// A non-ELF input is an error wrapping ErrNotELF and naming the file; an
// unresolvable DT_NEEDED is an error wrapping ErrNotFound and naming the
// library and the object that needs it. Statically linked inputs have no
// dependencies.
func Closure(files []string) ([]string, error) {
	return newResolver(DefaultLdSoConf).closure(files)
}

// resolver holds the caches of one Closure call.
type resolver struct {
	confPath string
	conf     []string // ld.so.conf directories, read on first use
	confRead bool
	objs     map[string]loaded   // path -> parse result, including failures
	sysdirs  map[[2]int][]string // (class, machine) -> ld.so.conf + default dirs
	visited  map[string]bool     // path + inherited RPATH dirs
	out      map[string]bool
}

type loaded struct {
	obj *object
	err error
}

// node is one object in the dependency graph with its search context.
type node struct {
	path      string
	obj       *object
	origin    string   // $ORIGIN: directory of path ("" if not needed or unknown)
	rpath     []string // own DT_RPATH, expanded (nil if DT_RUNPATH is present)
	runpath   []string // own DT_RUNPATH, expanded
	inherited []string // expanded DT_RPATH dirs of the loaders, deduplicated
}

func newResolver(confPath string) *resolver {
	return &resolver{
		confPath: confPath,
		objs:     map[string]loaded{},
		sysdirs:  map[[2]int][]string{},
		visited:  map[string]bool{},
		out:      map[string]bool{},
	}
}

func (r *resolver) load(path string) (*object, error) {
	if l, ok := r.objs[path]; ok {
		return l.obj, l.err
	}
	o, err := readObject(path)
	r.objs[path] = loaded{o, err}
	return o, err
}

func (r *resolver) closure(files []string) ([]string, error) {
	for _, f := range files {
		o, err := r.load(f)
		if err != nil {
			return nil, fmt.Errorf("elfdeps: %w", err)
		}
		if o.interp != "" {
			ld, err := r.load(o.interp)
			if err != nil {
				return nil, fmt.Errorf("elfdeps: interpreter of %s: %w", f, err)
			}
			if !sameKind(o, ld) {
				return nil, fmt.Errorf("elfdeps: interpreter %s of %s: wrong ELF class or machine", o.interp, f)
			}
			r.out[o.interp] = true
		}
		origin, err := inputOrigin(f, o)
		if err != nil {
			return nil, fmt.Errorf("elfdeps: $ORIGIN of %s: %w", f, err)
		}
		if err := r.walk(newNode(f, o, origin, nil)); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		delete(r.out, f)
	}
	paths := make([]string, 0, len(r.out))
	for p := range r.out {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths, nil
}

// inputOrigin returns $ORIGIN for an input, computed only if the object uses
// a token. A program (it has PT_INTERP) is started by execve, and ld.so takes
// its origin from /proc/self/exe, which is symlink-resolved; a module is
// dlopen'ed by the path given.
func inputOrigin(path string, o *object) (string, error) {
	if !usesDST(o) {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if o.interp != "" {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return "", err
		}
	}
	return dirOf(abs), nil
}

func usesDST(o *object) bool {
	for _, l := range [][]string{o.needed, o.rpath, o.runpath} {
		for _, s := range l {
			if strings.Contains(s, "$") {
				return true
			}
		}
	}
	return false
}

// dirOf strips the last path element like ld.so does for $ORIGIN: without
// cleaning, so "/a/b/../c/x.so" gives "/a/b/../c".
func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return p[:i]
}

func newNode(path string, o *object, origin string, inherited []string) *node {
	n := &node{path: path, obj: o, origin: origin, inherited: inherited}
	plat := platform(o.machine)
	for _, e := range o.rpath {
		if d, ok := expand(e, origin, plat); ok {
			n.rpath = append(n.rpath, d)
		}
	}
	for _, e := range o.runpath {
		if d, ok := expand(e, origin, plat); ok {
			n.runpath = append(n.runpath, d)
		}
	}
	return n
}

// walk records the dependencies of n and walks them in turn. A dependency's
// loader chain is n's: it inherits n's DT_RPATH and n's inherited dirs.
func (r *resolver) walk(n *node) error {
	key := n.path + "\x00" + strings.Join(n.inherited, "\x00")
	if r.visited[key] {
		return nil
	}
	r.visited[key] = true
	var inherit []string
	for _, d := range slices.Concat(n.rpath, n.inherited) {
		if !slices.Contains(inherit, d) {
			inherit = append(inherit, d)
		}
	}
	for _, name := range n.obj.needed {
		p, err := r.search(name, n)
		if err != nil {
			return err
		}
		r.out[p] = true
		dep, _ := r.load(p) // search only returns loadable paths
		if err := r.walk(newNode(p, dep, dirOf(p), inherit)); err != nil {
			return err
		}
	}
	return nil
}

// search finds the file ld.so opens for the DT_NEEDED entry name of n.
func (r *resolver) search(name string, n *node) (string, error) {
	expanded, ok := expand(name, n.origin, platform(n.obj.machine))
	if !ok {
		return "", fmt.Errorf("elfdeps: %s needed by %s: cannot expand dynamic string token", name, n.path)
	}
	if strings.Contains(expanded, "/") {
		o, err := r.load(expanded)
		if err != nil {
			return "", fmt.Errorf("elfdeps: %s needed by %s: %w", name, n.path, err)
		}
		if !sameKind(n.obj, o) {
			return "", fmt.Errorf("elfdeps: %s needed by %s: wrong ELF class or machine", name, n.path)
		}
		return expanded, nil
	}
	var dirs [][]string
	if !n.obj.hasRun {
		dirs = append(dirs, n.rpath, n.inherited)
	}
	dirs = append(dirs, n.runpath)
	if !n.obj.nodeflib {
		sys, err := r.systemDirs(n.obj)
		if err != nil {
			return "", err
		}
		dirs = append(dirs, sys)
	}
	for _, list := range dirs {
		for _, d := range list {
			p := strings.TrimRight(d, "/") + "/" + name
			// Any failure (missing, unreadable, not ELF, another
			// architecture) makes ld.so try the next directory.
			if o, err := r.load(p); err == nil && sameKind(n.obj, o) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("elfdeps: %s needed by %s: %w", name, n.path, ErrNotFound)
}

// systemDirs returns the ld.so.conf directories followed by the default
// directories for o's class and machine, without duplicates.
func (r *resolver) systemDirs(o *object) ([]string, error) {
	key := [2]int{int(o.class), int(o.machine)}
	if d, ok := r.sysdirs[key]; ok {
		return d, nil
	}
	if !r.confRead {
		conf, err := readLdSoConf(r.confPath)
		if err != nil {
			return nil, fmt.Errorf("elfdeps: %w", err)
		}
		r.conf, r.confRead = conf, true
	}
	dirs := slices.Clone(r.conf)
	for _, d := range defaultDirs(o.class, o.machine) {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	r.sysdirs[key] = dirs
	return dirs, nil
}

func sameKind(a, b *object) bool {
	return a.class == b.class && a.machine == b.machine
}
