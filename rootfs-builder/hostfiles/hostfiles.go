// Package hostfiles plans which host files a root filesystem needs so that
// the host's interpreter runs from it: the interpreter, the host paths the
// builder names (the stdlib directory, copied extension modules), and the
// dynamic loader and shared libraries needed by the interpreter and by
// every extension module under those paths.
//
// Host paths often go through symlinks (merged /usr: /lib -> usr/lib;
// /usr/bin/python3 -> python3.11; libz.so.1 -> libz.so.1.2.13). So that the
// same paths resolve the same way inside the root, every symlink met while
// resolving a path is recreated in the root with the same link text, and
// only the final, symlink-free real path is copied, at the same absolute
// path.
//
// The package only plans; it copies nothing. A Plan is a pure value the
// rootfs builder (rootfs-builder/build) executes: create the symlinks,
// then copy each source to its destination in the root being built.
package hostfiles

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/rootfs-builder/elfdeps"
)

// Copy is one host file or directory the root needs.
type Copy struct {
	Source string // host real path (symlink-free)
	Dest   string // path inside the new root (equal to Source)
	Dir    bool   // a directory (else a regular file)
}

// Symlink is one symlink to create in the new root.
type Symlink struct {
	Path   string // absolute path inside the new root
	Target string // link text, exactly as on the host
}

// Plan is the content of the new root.
type Plan struct {
	// Interpreter is the interpreter's path inside the root: the path the
	// builder gave, which resolves inside through the recreated symlinks.
	Interpreter string
	// Copies are sorted by Dest; no Dest lies inside a copied directory.
	Copies []Copy
	// Symlinks are in creation order. Each one's parent directories are
	// real directories on the host, never links, and none lies inside a
	// copied directory (the copy brings it).
	Symlinks []Symlink
}

// New plans the root for interpreter (an absolute path) and hostPaths
// (absolute directories or files, e.g. the stdlib directory). Each is
// mirrored: its symlink chain recreated, its real path copied. Then the ELF
// closure (elfdeps.Closure) of the interpreter and of every extension module
// — an ELF file named *.so or *.so.* under or at a host path — is mirrored
// too, so that the loader finds every file at the path it opens.
//
// Errors name the path: not absolute, missing ("interpreter /usr/bin/python9:
// no such file or directory"), an interpreter that is not an executable
// regular file, a symlink loop (more than 40 links, as the kernel).
func New(interpreter string, hostPaths []string) (*Plan, error) {
	p := newPlanner("")
	if !filepath.IsAbs(interpreter) {
		return nil, fmt.Errorf("hostfiles: interpreter %q: not an absolute path", interpreter)
	}
	_, mode, err := p.mirror(interpreter)
	if err != nil {
		return nil, fmt.Errorf("hostfiles: interpreter %s: %w", interpreter, err)
	}
	if !mode.IsRegular() {
		return nil, fmt.Errorf("hostfiles: interpreter %s: not a regular file (%v)", interpreter, mode.Type())
	}
	if mode&0o111 == 0 {
		return nil, fmt.Errorf("hostfiles: interpreter %s: not executable (mode %v)", interpreter, mode.Perm())
	}
	elfs := []string{interpreter}
	for _, hp := range hostPaths {
		if !filepath.IsAbs(hp) {
			return nil, fmt.Errorf("hostfiles: host path %q: not an absolute path", hp)
		}
		real, mode, err := p.mirror(hp)
		if err != nil {
			return nil, fmt.Errorf("hostfiles: host path %s: %w", hp, err)
		}
		mods, err := p.modules(real, mode)
		if err != nil {
			return nil, fmt.Errorf("hostfiles: host path %s: %w", hp, err)
		}
		elfs = append(elfs, mods...)
	}
	libs, err := elfdeps.Closure(elfs)
	if err != nil {
		return nil, fmt.Errorf("hostfiles: %w", err)
	}
	for _, lib := range libs {
		if _, _, err := p.mirror(lib); err != nil {
			return nil, fmt.Errorf("hostfiles: library %s: %w", lib, err)
		}
	}
	return p.plan(interpreter)
}

// modules returns the extension modules at or under the real path real: ELF
// files named *.so or *.so.*. A module that is a symlink is mirrored as well,
// as its target may lie outside the bound directory; a dangling one is
// skipped, as Python could not load it either.
func (p *planner) modules(real string, mode fs.FileMode) ([]string, error) {
	if !mode.IsDir() {
		if !isModuleName(real) || !mode.IsRegular() {
			return nil, nil
		}
		ok, err := p.isELF(real)
		if !ok {
			return nil, err
		}
		return []string{real}, nil
	}
	var mods []string
	err := filepath.WalkDir(p.root+real, func(hpath string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		path := strings.TrimPrefix(hpath, p.root)
		if d.IsDir() || !isModuleName(path) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			real, mode, links, err := p.resolve(path)
			if err != nil || !mode.IsRegular() {
				return nil
			}
			if ok, err := p.isELF(real); !ok {
				return err
			}
			mods = append(mods, path)
			return p.record(real, mode, links)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if ok, err := p.isELF(path); !ok {
			return err
		}
		mods = append(mods, path)
		return nil
	})
	return mods, err
}

// isModuleName reports whether the file name is *.so or *.so.*.
func isModuleName(path string) bool {
	base := filepath.Base(path)
	return strings.HasSuffix(base, ".so") || strings.Contains(base, ".so.")
}

// isELF reports whether path starts with the ELF magic. Other files named
// like modules (linker scripts, data) are not loaded by Python.
func (p *planner) isELF(path string) (bool, error) {
	f, err := os.Open(p.root + path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, nil
		}
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return string(magic[:]) == "\x7fELF", nil
}
