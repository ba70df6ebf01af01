package build

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// installLayer installs the extra lock's packages that the parent lacks.
// pip writes into a staging directory (--root), never into the linked
// tree; the staged files are then renamed into the root, each at a path
// the parent does not have. Last, the whole site-packages must hold the
// parent's packages and the lock's, and pip check must find every
// requirement of the new packages met.
func (b *builder) installLayer() error {
	extra, err := b.extraRequirements()
	if err != nil {
		return err
	}
	if len(extra) > 0 {
		if err := b.stageAndMove(extra); err != nil {
			return err
		}
	}
	if err := b.checkDists(append(b.parent.requirements(), extra...)); err != nil {
		return err
	}
	return b.pipCheck(extra)
}

// extraRequirements returns the lock's entries the parent does not have.
// One the parent has at the same version is skipped, and said so; at
// another version it refuses the build.
func (b *builder) extraRequirements() ([]Requirement, error) {
	pins := b.parent.pins()
	var extra []Requirement
	for _, r := range b.reqs {
		nv, ok := pins[normalize(r.Name)]
		switch {
		case !ok:
			extra = append(extra, r)
		case canonicalVersion(nv[1]) == canonicalVersion(r.Version):
			b.rep.Step(fmt.Sprintf("skip %s: the parent %s has it", r, b.parent.label()))
		default:
			return nil, &LockError{File: b.o.Lock, Line: r.Line, Package: r.Name,
				Reason: fmt.Sprintf("%s is in the parent %s at %s; a child root cannot replace a parent's package", r, b.parent.label(), nv[1])}
		}
	}
	return extra, nil
}

// stageAndMove has pip install extra under a staging root and moves the
// staged files into the root.
func (b *builder) stageAndMove(extra []Requirement) error {
	pip, err := b.findPip()
	if err != nil {
		return err
	}
	scratch := b.inRoot("/" + rootfs.MetaDir)
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	lock := filepath.Join(scratch, "pip-requirements.txt")
	if err := os.WriteFile(lock, pipLock(extra), 0o600); err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	stage := filepath.Join(scratch, "stage")
	// --root: the venv's own layout (as the full build installs it),
	// under stage. --ignore-installed: pip never uninstalls or touches
	// what the venv has (the parent's linked files).
	if err := b.pipInstall(pip, scratch, lock, "--root", stage, "--ignore-installed"); err != nil {
		return err
	}
	if err := b.moveStaged(filepath.Join(stage, b.root)); err != nil {
		return err
	}
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	return nil
}

// moveStaged renames every file and symlink under staged (a mirror of
// the root's layout) to the same path in the root, creating directories
// as needed. /venv/bin is left out (console scripts, see pruneVenvBin).
// A path the root has already refuses the build, naming the package that
// ships it; all are checked before anything is moved.
func (b *builder) moveStaged(staged string) error {
	if err := b.walkStaged(staged, false); err != nil {
		return err
	}
	return b.walkStaged(staged, true)
}

// walkStaged checks every staged path against the root, and with move
// moves it there.
func (b *builder) walkStaged(staged string, move bool) error {
	return filepath.WalkDir(staged, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("install packages: staged files: %w", err)
		}
		rel, err := filepath.Rel(staged, p)
		if err != nil {
			return fmt.Errorf("install packages: %w", err)
		}
		if rel == "." {
			return nil
		}
		inside := "/" + filepath.ToSlash(rel)
		switch {
		case inside == "/venv/bin":
			return fs.SkipDir
		case inside != "/venv" && !strings.HasPrefix(inside, "/venv/"):
			return fmt.Errorf("install packages: pip staged %s, outside the venv", inside)
		}
		dst := b.inRoot(inside)
		fi, err := os.Lstat(dst)
		switch {
		case err == nil && d.IsDir() && fi.IsDir():
			return nil // a directory of both: the new files go into the root's
		case err == nil:
			return b.conflict(staged, inside)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("install packages: %w", err)
		case !move:
			return nil
		case d.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return fmt.Errorf("install packages: %w", err)
			}
			return nil
		}
		if err := os.Rename(p, dst); err != nil {
			return fmt.Errorf("install packages: move the staged file: %w", err)
		}
		return nil
	})
}

// conflict is the error for a staged path the root has already.
func (b *builder) conflict(staged, inside string) error {
	owner := b.stagedOwner(staged, inside)
	return fmt.Errorf("%s: %s installs %s, which the parent %s has already: a child root cannot replace a parent's file",
		b.o.Lock, owner, inside, b.parent.label())
}

// stagedOwner names the staged distribution whose RECORD lists inside,
// or "a package of the lock" if none does.
func (b *builder) stagedOwner(staged, inside string) string {
	sp := b.sitePackages()
	dists, _ := filepath.Glob(filepath.Join(staged, filepath.FromSlash(sp), "*.dist-info"))
	for _, dist := range dists {
		name, version, err := readMetadata(filepath.Join(dist, "METADATA"))
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join(dist, "RECORD"))
		if err != nil {
			continue
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			continue
		}
		for _, row := range rows {
			if len(row) > 0 && path.Join(sp, row[0]) == inside {
				return name + "==" + version
			}
		}
	}
	return "a package of the lock"
}

// pipCheck runs `pip check` on the root's venv and refuses a requirement
// of a new package that neither the parent nor the lock meets. Problems
// of the parent's own packages are the parent's, not reported here.
func (b *builder) pipCheck(extra []Requirement) error {
	if len(extra) == 0 {
		return nil
	}
	// No Requires-Dist in the new packages: no requirement to check.
	var requires bool
	for _, r := range extra {
		has, err := b.hasRequirements(r)
		if err != nil {
			return err
		}
		requires = requires || has
	}
	if !requires {
		return nil
	}
	pip, err := b.findPip()
	if err != nil {
		return err
	}
	cmd := b.command(pip, "-m", "pip", "--python", b.inRoot("/venv/bin/python"), "check",
		"--no-input", "--disable-pip-version-check")
	cmd.Env = pipEnv(os.Environ())
	cmd.Dir = b.root
	out, runErr := cmd.CombinedOutput()
	if runErr == nil {
		return nil
	}
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		first, _, _ := strings.Cut(sc.Text(), " ")
		if slices.ContainsFunc(extra, func(r Requirement) bool { return normalize(r.Name) == normalize(first) }) {
			problems = append(problems, strings.TrimSpace(sc.Text()))
		}
	}
	if len(problems) == 0 {
		var ee interface{ ExitCode() int }
		if errors.As(runErr, &ee) && ee.ExitCode() == 1 {
			return nil // only the parent's own packages are reported
		}
		return fmt.Errorf("install packages: %s -m pip check: %w\n%s", pip, runErr, lastLines(out, 20))
	}
	return fmt.Errorf("%s: the packages of the lock need what neither the parent %s nor the lock provides (add it to the lock):\n%s",
		b.o.Lock, b.parent.label(), strings.Join(problems, "\n"))
}

// hasRequirements reports whether the installed distribution of r
// declares any requirement (a Requires-Dist header in its METADATA).
func (b *builder) hasRequirements(r Requirement) (bool, error) {
	sp := b.inRoot(b.sitePackages())
	dists, err := filepath.Glob(filepath.Join(sp, "*.dist-info"))
	if err != nil {
		return false, fmt.Errorf("check requirements: %w", err)
	}
	for _, d := range dists {
		meta := filepath.Join(d, "METADATA")
		name, _, err := readMetadata(meta)
		if err != nil || normalize(name) != normalize(r.Name) {
			continue
		}
		data, err := os.ReadFile(meta)
		if err != nil {
			return false, fmt.Errorf("check requirements: %w", err)
		}
		head, _, _ := bytes.Cut(data, []byte("\n\n"))
		return bytes.Contains(bytes.ToLower(head), []byte("\nrequires-dist:")), nil
	}
	return false, fmt.Errorf("check requirements: %s: no dist-info in %s", r, b.sitePackages())
}
