package build

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// stdlibDropTop are top-level entries of the stdlib directory left out of
// the root, with the reason.
var stdlibDropTop = map[string]string{
	"test":             "CPython's test suite",
	"idlelib":          "the IDLE editor, needs tkinter",
	"tkinter":          "needs Tcl/Tk and a display",
	"turtledemo":       "demos for turtle",
	"turtle.py":        "needs tkinter",
	"ensurepip":        "installs pip at run time, which a vetted root never does",
	"site-packages":    "the base interpreter's packages; the venv has its own",
	"dist-packages":    "Debian's packages, not the standard library",
	"sitecustomize.py": "Debian's apport hook, a symlink into /etc/python3.X",
}

// stdlibDropDirs are directory names left out at any depth: the test
// suites of stdlib packages (unittest/test, lib2to3/tests, ctypes/test,
// idlelib/idle_test, ...) and the host's bytecode, which is recompiled.
var stdlibDropDirs = map[string]bool{"test": true, "tests": true, "idle_test": true, "__pycache__": true}

// dynloadDrop are name prefixes of lib-dynload modules left out: CPython's
// test and example extension modules, and tkinter's.
var dynloadDrop = []string{"_test", "_ctypes_test", "_xxtestfuzz", "xxlimited", "_xxsubinterpreters_test", "_tkinter"}

// keepStdlib reports whether rel, a path relative to the stdlib directory
// (or, with dynload set, to the lib-dynload directory), belongs in the root.
func keepStdlib(rel string, dynload bool) bool {
	parts := strings.Split(rel, "/")
	// config-3.X-ARCH holds libpython*.a, the Makefile and the Setup
	// files: for building extensions, never used at run time.
	if _, drop := stdlibDropTop[parts[0]]; !dynload && (drop || strings.HasPrefix(parts[0], "config-")) {
		return false
	}
	for _, p := range parts[:len(parts)-1] {
		if stdlibDropDirs[p] {
			return false
		}
	}
	last := parts[len(parts)-1]
	if dynload || len(parts) == 2 && parts[0] == "lib-dynload" {
		for _, prefix := range dynloadDrop {
			if strings.HasPrefix(last, prefix) {
				return false
			}
		}
	}
	return !stdlibDropDirs[last]
}

// copyStdlib copies the stdlib directory and, if it lies elsewhere, the
// lib-dynload directory into the root at their real host paths, without
// what keepStdlib leaves out, and notes the ELF extension modules.
func (b *builder) copyStdlib() error {
	stdlib, err := filepath.EvalSymlinks(b.py.Stdlib)
	if err != nil {
		return fmt.Errorf("stdlib: %w", err)
	}
	b.trees = []string{stdlib}
	if b.py.Dynload != "" {
		dyn, err := filepath.EvalSymlinks(b.py.Dynload)
		if err != nil {
			return fmt.Errorf("lib-dynload: %w", err)
		}
		if !within(dyn, stdlib) {
			b.trees = append(b.trees, dyn)
		}
	}
	for i, tree := range b.trees {
		if err := b.copyTree(tree, i > 0); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the host directory tree into the root at the same path.
// A symlink is kept if it resolves to a kept path inside the tree, and
// replaced by a copy of its target if that is a regular file elsewhere
// (the root has nothing outside what is copied); any other is an error.
func (b *builder) copyTree(tree string, dynload bool) error {
	return filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy stdlib: %w", err)
		}
		if err := b.ctx.Err(); err != nil {
			return err
		}
		dst := b.inRoot(p)
		if p == tree {
			return os.MkdirAll(dst, 0o755)
		}
		rel, _ := filepath.Rel(tree, p)
		if !keepStdlib(filepath.ToSlash(rel), dynload) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return fmt.Errorf("copy stdlib: %w", err)
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return b.copyStdlibLink(tree, p, dynload)
		case d.Type().IsRegular():
			if err := copyFile(p, dst); err != nil {
				return err
			}
			return b.noteModule(p)
		}
		return fmt.Errorf("copy stdlib: %s: not a file, directory or symlink", p)
	})
}

// copyStdlibLink copies the symlink p of tree (see copyTree).
func (b *builder) copyStdlibLink(tree, p string, dynload bool) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("copy stdlib: symlink %s: %w", p, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("copy stdlib: symlink %s: %w", p, err)
	}
	if rel, err := filepath.Rel(tree, real); err == nil && within(real, tree) && keepStdlib(filepath.ToSlash(rel), dynload) {
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("copy stdlib: %w", err)
		}
		if err := os.Symlink(target, b.inRoot(p)); err != nil {
			return fmt.Errorf("copy stdlib: %w", err)
		}
		return b.noteModule(p)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("copy stdlib: symlink %s points outside %s to %s, which is not a regular file", p, tree, real)
	}
	if err := copyFile(real, b.inRoot(p)); err != nil {
		return err
	}
	return b.noteModule(p)
}

// noteModule records p if it is an ELF extension module: named *.so or
// *.so.*, starting with the ELF magic.
func (b *builder) noteModule(p string) error {
	base := filepath.Base(p)
	if !strings.HasSuffix(base, ".so") && !strings.Contains(base, ".so.") {
		return nil
	}
	ok, err := isELF(p)
	if err != nil {
		return err
	}
	if ok {
		b.modules = append(b.modules, p)
	}
	return nil
}

// within reports whether p is dir or lies under it (both clean).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// copyFile copies the regular file src to dst, which must not exist, with
// src's permission bits (normalize fixes them later). Neither is followed
// if it is a symlink.
func copyFile(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("copy %s: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// isELF reports whether the file at path (symlinks followed) starts with
// the ELF magic.
func isELF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read ELF magic: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, nil
		}
		return false, fmt.Errorf("read ELF magic of %s: %w", path, err)
	}
	return string(magic[:]) == "\x7fELF", nil
}
