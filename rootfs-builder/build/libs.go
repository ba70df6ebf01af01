package build

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/rootfs-builder/elfdeps"
	"github.com/nsbox/nsbox/rootfs-builder/hostfiles"
)

// localeDir is glibc's compiled C.UTF-8 locale (glibc 2.35 and later).
const localeDir = "/usr/lib/locale/C.utf8"

// localeFiles lists the regular files of localeDir, each planned as a
// host file (the plan copies files; whole trees only for the stdlib).
// None when the host has no such locale.
func localeFiles() ([]string, error) {
	var files []string
	err := filepath.WalkDir(localeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the locale %s: %w", localeDir, err)
	}
	return files, nil
}

// copyLibraries copies the interpreter, the dynamic loader and the shared
// libraries into the root, with the symlinks leading to them.
//
// The host side is planned by rootfs-builder/hostfiles: the
// interpreter, the stdlib's extension modules and the host libraries the
// venv's ELF files need, each mirrored (symlink chain recreated, real file
// copied) with the ELF closure (elfdeps, as ld.so resolves it). The venv's
// ELF files are in the build directory already; their closure is computed
// there, so $ORIGIN-relative libraries (numpy.libs/...) resolve inside the
// root, and only what it finds on the host is added to the plan.
func (b *builder) copyLibraries() error {
	venvELFs, err := findELFs(b.inRoot("/venv"))
	if err != nil {
		return err
	}
	// stdlib/os.py brings the symlink chain of the stdlib directory as
	// Python names it; a module under lib-dynload, that of lib-dynload.
	hostPaths := []string{filepath.Join(b.py.Stdlib, "os.py")}
	if p := b.dynloadProbe(); p != "" {
		hostPaths = append(hostPaths, p)
	}
	hostPaths = append(hostPaths, b.modules...)
	// The C.UTF-8 locale the program's LANG names (spec.BaseEnv), so that
	// setlocale(LC_ALL, "") works as on a normal system; the host's glibc
	// ships it beside the loader it runs with. A host without it builds a
	// root without it: setlocale then fails as it did before.
	locale, err := localeFiles()
	if err != nil {
		return err
	}
	hostPaths = append(hostPaths, locale...)
	if len(venvELFs) > 0 {
		libs, err := venvClosure(venvELFs)
		if err != nil {
			return fmt.Errorf("ELF closure of the venv (built in %s): %w", b.root, err)
		}
		for _, l := range libs {
			if !within(l, b.root) {
				hostPaths = append(hostPaths, l)
			}
		}
	}
	plan, err := hostfiles.New(b.o.Python, hostPaths)
	if err != nil {
		return err
	}
	for _, l := range plan.Symlinks {
		if err := b.symlink(l.Target, l.Path); err != nil {
			return err
		}
	}
	for _, c := range plan.Copies {
		if err := b.copyPlanned(c); err != nil {
			return err
		}
	}
	return nil
}

// dynloadProbe returns the path, as Python names it, of a module copied
// from lib-dynload, or "" if there is none.
func (b *builder) dynloadProbe() string {
	if b.py.Dynload == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(b.py.Dynload)
	if err != nil {
		return ""
	}
	for _, m := range b.modules {
		if filepath.Dir(m) == real {
			return filepath.Join(b.py.Dynload, filepath.Base(m))
		}
	}
	return ""
}

// symlink creates the symlink p -> target in the root, with its parent
// directories; an identical existing link is fine.
func (b *builder) symlink(target, p string) error {
	dst := b.inRoot(p)
	if old, err := os.Readlink(dst); err == nil {
		if old != target {
			return fmt.Errorf("symlink %s: exists with target %q, want %q", p, old, target)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("symlink %s: %w", p, err)
	}
	if err := os.Symlink(target, dst); err != nil {
		return fmt.Errorf("symlink %s: %w", p, err)
	}
	return nil
}

// copyPlanned copies one file of the plan into the root. Files under the
// copied stdlib trees are there already (or deliberately left out).
func (b *builder) copyPlanned(c hostfiles.Copy) error {
	for _, t := range b.trees {
		if within(c.Source, t) {
			return nil
		}
	}
	if c.Dir {
		return fmt.Errorf("bug: the root plan copies the directory %s", c.Source)
	}
	dst := b.inRoot(c.Dest)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy %s: %w", c.Source, err)
	}
	return copyFile(c.Source, dst)
}

// findELFs returns every loadable ELF file (a shared object or an
// executable) under dir, whatever its name: extension modules, bundled
// libraries, and programs a wheel may ship.
func findELFs(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("find ELF files: %w", err)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		ok, err := isLoadableELF(p)
		if ok {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

// isLoadableELF reports whether the file p is a shared object or an
// executable.
func isLoadableELF(p string) (bool, error) {
	if ok, err := isELF(p); !ok || err != nil {
		return false, err
	}
	f, err := elf.Open(p)
	if err != nil {
		return false, fmt.Errorf("find ELF files: %w", err)
	}
	defer f.Close()
	return f.Type == elf.ET_DYN || f.Type == elf.ET_EXEC, nil
}

// interpreterLibs returns the dynamic loader the interpreter names
// (PT_INTERP; "" if it is statically linked) and the libraries it loads,
// as paths inside the root.
func (b *builder) interpreterLibs() (loader string, libs []string, err error) {
	f, err := elf.Open(b.o.Python)
	if err != nil {
		return "", nil, fmt.Errorf("read interpreter: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, p.Filesz)
		if _, err := p.ReadAt(buf, 0); err != nil {
			return "", nil, fmt.Errorf("read PT_INTERP of %s: %w", b.o.Python, err)
		}
		loader = strings.TrimRight(string(buf), "\x00")
	}
	libs, err = elfdeps.Closure([]string{b.o.Python})
	if err != nil {
		return "", nil, err
	}
	return loader, libs, nil
}
