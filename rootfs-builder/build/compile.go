package build

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// compileErrRe matches compileall's report of a file it could not
// compile (with -q): *** Error compiling '/path/x.py'...
var compileErrRe = lazyRegexp(`(?m)^\*\*\* Error compiling (.+)\.\.\.$`)

// compile writes a .pyc for every .py of the stdlib and the venv with the
// interpreter's own compileall. unchecked-hash: the root is read-only, and
// such a pyc is loaded without reading or even stat-ing its source, so an
// import costs one open. -s/-p record the paths as seen inside the root in
// the code objects (tracebacks name /usr/lib/python3.11/os.py, not the
// build directory).
//
// Every stdlib file must compile. A venv file that compileall reports as
// invalid (e.g. Python 2 syntax shipped as data) is left without a pyc, as
// pip does; importing it would fail anyway.
func (b *builder) compile() error {
	dirs := []string{}
	for _, t := range b.trees {
		dirs = append(dirs, b.inRoot(t))
	}
	sp := b.inRoot(b.sitePackages())
	dirs = append(dirs, sp)
	args := append([]string{"-I", "-m", "compileall", "-q", "-f", "-j0",
		"--invalidation-mode", "unchecked-hash", "-s", b.root, "-p", "/"}, dirs...)
	cmd := b.command(b.o.Python, args...)
	out, runErr := cmd.CombinedOutput()
	invalid := map[string]bool{}
	for _, m := range compileErrRe().FindAllSubmatch(out, -1) {
		p := string(m[1])
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		} else {
			p = strings.Trim(p, `'"`)
		}
		invalid[p] = true
	}
	for _, d := range dirs {
		if err := b.checkCompiled(d, d == sp, invalid); err != nil {
			return fmt.Errorf("%w\ncompileall output (end):\n%s", err, lastLines(out, 20))
		}
	}
	if runErr != nil && len(invalid) == 0 {
		return fmt.Errorf("compile: %s -m compileall: %w\n%s", b.o.Python, runErr, lastLines(out, 20))
	}
	return nil
}

// checkCompiled requires a pyc next to every .py under dir, except, when
// tolerant, for the files compileall reported as invalid.
func (b *builder) checkCompiled(dir string, tolerant bool, invalid map[string]bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("compile: %w", err)
		}
		if d.IsDir() || !strings.HasSuffix(p, ".py") {
			return nil
		}
		if _, err := os.Stat(b.pycPath(p)); err == nil {
			return nil
		}
		if tolerant && invalid[p] {
			return nil
		}
		return fmt.Errorf("compile: %s has no %s", strings.TrimPrefix(p, b.root), filepath.Base(b.pycPath(p)))
	})
}
