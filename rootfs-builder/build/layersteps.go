package build

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/rootfs-builder/elfdeps"
	"github.com/nsbox/nsbox/rootfs-builder/hostfiles"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// The later steps of a layered build (layer.go): each sees only the
// files this build added, and none writes into a linked file.

// newELFs returns the new files that are loadable ELF objects.
func (b *builder) newELFs() ([]string, error) {
	files, err := b.newFiles()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		ok, err := isLoadableELF(f)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// copyLayerLibraries adds the host libraries the new ELF objects need and
// the root lacks, as copyLibraries does (with their symlink chains). A
// path the root has already is left as it is: never rewritten.
func (b *builder) copyLayerLibraries() error {
	elfs, err := b.newELFs()
	if err != nil || len(elfs) == 0 {
		return err
	}
	libs, err := elfdeps.Closure(elfs)
	if err != nil {
		return fmt.Errorf("ELF closure of the new files (built in %s): %w", b.root, err)
	}
	var host []string
	for _, l := range libs {
		if !within(l, b.root) {
			host = append(host, l)
		}
	}
	if len(host) == 0 {
		return nil
	}
	plan, err := hostfiles.New(b.o.Python, host)
	if err != nil {
		return err
	}
	for _, l := range plan.Symlinks {
		if err := b.symlink(l.Target, l.Path); err != nil {
			return err
		}
	}
	for _, c := range plan.Copies {
		if c.Dir {
			continue // directories of the plan's symlink chains, there already
		}
		if err := b.copyPlanned(c); err != nil {
			return err
		}
	}
	return nil
}

// checkLayerLoadable runs the root's loader on every new ELF object (the
// parent's were checked when it was built).
func (b *builder) checkLayerLoadable() error {
	loader, _, err := b.interpreterLibs()
	if err != nil || loader == "" {
		return err
	}
	elfs, err := b.newELFs()
	if err != nil {
		return err
	}
	for _, e := range elfs {
		if err := b.listInRoot(loader, e); err != nil {
			return err
		}
	}
	return nil
}

// compileLayer writes the pyc of every new .py, as compile does. A pyc is
// written to a temporary file and renamed into place by the interpreter,
// and a new .py's pyc is a new path anyway.
func (b *builder) compileLayer() error {
	files, err := b.newFiles()
	if err != nil {
		return err
	}
	var py []string
	for _, f := range files {
		if strings.HasSuffix(f, ".py") {
			py = append(py, f)
		}
	}
	if len(py) == 0 {
		return nil
	}
	cmd := b.command(b.o.Python, "-I", "-m", "compileall", "-q", "-f",
		"--invalidation-mode", "unchecked-hash", "-s", b.root, "-p", "/", "-i", "-")
	cmd.Stdin = strings.NewReader(strings.Join(py, "\n") + "\n")
	out, runErr := cmd.CombinedOutput()
	invalid := map[string]bool{}
	for _, m := range compileErrRe().FindAllSubmatch(out, -1) {
		invalid[strings.Trim(string(m[1]), `'"`)] = true
	}
	for _, p := range py {
		if _, err := os.Stat(b.pycPath(p)); err == nil || invalid[p] {
			continue
		}
		return fmt.Errorf("compile: %s has no %s\ncompileall output (end):\n%s", b.inside(p), filepath.Base(b.pycPath(p)), lastLines(out, 20))
	}
	if runErr != nil && len(invalid) == 0 {
		return fmt.Errorf("compile: %s -m compileall: %w\n%s", b.o.Python, runErr, lastLines(out, 20))
	}
	return nil
}

// layerRunner keeps the parent's compiled runner when it is this nsbox's
// (its path names its source's digest), else compiles it as a new file.
func (b *builder) layerRunner() error {
	if _, err := os.Lstat(b.inRoot(pyrunner.CompiledPath())); err == nil {
		return nil
	}
	return b.compileRunner()
}

// normalizeLayer normalizes every path but the linked files, whose inodes
// are the parent's: a chmod would change the parent too. Their modes were
// checked against the parent's manifest when they were linked, and the
// parent's build normalized them.
func (b *builder) normalizeLayer() error {
	_, interp, err := resolveInRoot(b.root, b.o.Python)
	if err != nil {
		return fmt.Errorf("normalize: interpreter %s in the root: %w", b.o.Python, err)
	}
	return filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("normalize: %w", err)
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return fmt.Errorf("normalize: %w", err)
			}
			if _, ok := b.isLinked(b.inside(p), fi); ok {
				return nil
			}
		}
		return b.normalizeOne(p, d, interp)
	})
}
