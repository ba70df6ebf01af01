// Package roots finds the root filesystem a plan names and checks it
// before a run. A plan gives either a built-in root name, resolved in the
// roots directory (Dir), or the absolute path of a root built by
// `nsbox rootfs build`.
//
// Opening a root never builds one: building is the builder's work
// (rootfs-builder), done before a run. The command line builds the
// built-in "base" root (the standard library of the host's
// /usr/bin/python3.11, no packages) on first use and says so; "datasci",
// "datasci-min" and "web" need packages from PyPI and are built on purpose
// (`make datasci`, `make datasci-min`, `make web`).
package roots

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// DefaultDir holds the built-in roots; NSBOX_ROOTS_DIR overrides it. It is
// separate from the state directory so that runs with their own state
// directories (tests, several users of one host) share one base root.
const DefaultDir = "/var/lib/nsbox/roots"

// Dir returns the roots directory: NSBOX_ROOTS_DIR, else DefaultDir for
// root and userns.DataHome's "roots" for any other user.
func Dir() string {
	if d := os.Getenv("NSBOX_ROOTS_DIR"); d != "" {
		return d
	}
	if userns.NotRoot() {
		return filepath.Join(userns.DataHome(), "roots")
	}
	return DefaultDir
}

// Root is a checked root filesystem, held for a run: a rebuild leaves it
// in place until Close.
type Root struct {
	// Dir is the directory of the generation the run uses (rootfs
	// "Generations"): mount and read this, never Path, which a rebuild may
	// point at another generation at any moment.
	Dir    string
	Path   string         // the root's path, as the policy names it
	Header *rootfs.Header // its header: interpreter path inside, critical files
	held   *rootfs.Held
}

// Close lets go of the root's generation: once no run holds it and it is
// not current, a build or `nsbox rootfs sweep` removes it.
func (r *Root) Close() error { return r.held.Close() }

// Names are the built-in roots a policy may name instead of a path.
var Names = []string{"base", "datasci", "datasci-min", "web"}

// IsBuiltin reports whether name is a built-in root's name.
func IsBuiltin(name string) bool { return slices.Contains(Names, name) }

// Path returns where the root nameOrPath lives: in Dir for a built-in
// name, else the path itself.
//
// For another user than root, without NSBOX_ROOTS_DIR, a built-in root
// the user has not built is taken from DefaultDir when root built it
// there: shared, and read-only to the user (it is only read and held).
func Path(nameOrPath string) string {
	if !IsBuiltin(nameOrPath) {
		return nameOrPath
	}
	own := filepath.Join(Dir(), nameOrPath)
	shared := filepath.Join(DefaultDir, nameOrPath)
	if os.Getenv("NSBOX_ROOTS_DIR") == "" && userns.NotRoot() && !exists(own) && exists(shared) {
		return shared
	}
	return own
}

// Open holds the current generation of the root nameOrPath for a run
// (rootfs.Hold: a rebuild during the run leaves it in place) and checks
// it: that it holds this nsbox's compiled runner, and against its
// manifest, quickly (the manifest's hash and the critical files) or, with
// full, by re-hashing every file. It builds nothing. The caller closes
// the Root when the run is over.
func Open(nameOrPath string, full bool) (*Root, error) {
	dir := Path(nameOrPath)
	if !exists(dir) && IsBuiltin(nameOrPath) {
		return nil, &NotBuiltError{Name: nameOrPath, Dir: dir}
	}
	held, err := rootfs.Hold(dir)
	if err != nil {
		return nil, err
	}
	r, err := check(nameOrPath, dir, held.Dir, full)
	if err != nil {
		held.Close()
		return nil, err
	}
	r.held = held
	return r, nil
}

// check checks the generation gen of the root dir.
func check(nameOrPath, dir, gen string, full bool) (*Root, error) {
	hdr, err := rootfs.Check(gen) // its errors name the root and the file
	if err != nil {
		return nil, err
	}
	if !HasRunner(gen) {
		return nil, &NotBuiltError{Name: nameOrPath, Dir: dir, OldRunner: true}
	}
	if full {
		rep, err := rootfs.Verify(gen)
		if err != nil {
			return nil, fmt.Errorf("verify root %s: %w", gen, err)
		}
		if !rep.OK() {
			return nil, fmt.Errorf("root %s does not match its manifest: %s (rebuild it, or run `nsbox rootfs verify %s`)", gen, summary(rep), dir)
		}
	}
	return &Root{Dir: gen, Path: dir, Header: hdr}, nil
}

// BasePython is the host interpreter the base root is built from.
const BasePython = "/usr/bin/python3.11"

// NotBuiltError is a root that must be built (again) before it can run:
// a built-in root never built, or a root without this nsbox's runner.
type NotBuiltError struct {
	Name      string // as the policy gave it
	Dir       string
	OldRunner bool // the root exists but its runner is another nsbox's
}

func (e *NotBuiltError) Error() string {
	lock := "--lock LOCK "
	if IsBuiltin(e.Name) && e.Name != "base" {
		lock = "--lock policies/" + e.Name + ".lock "
	}
	build := fmt.Sprintf("`nsbox rootfs build --python %s %s--out %s`", BasePython, lock, e.Dir)
	if e.Name == "base" {
		build = fmt.Sprintf("any `nsbox run` with a policy on the base root, or `nsbox rootfs build --python %s --out %s`", BasePython, e.Dir)
	} else if IsBuiltin(e.Name) {
		build = fmt.Sprintf("`make %s` (or %s)", e.Name, build)
	}
	if e.OldRunner {
		return fmt.Sprintf("root %s has no Python runner for this nsbox (it was built by another version): rebuild it with %s", e.Dir, build)
	}
	return fmt.Sprintf("built-in root %q is not built yet at %s: build it with %s", e.Name, e.Dir, build)
}

// summary names the first few differences of a failed verification.
func summary(r rootfs.Report) string {
	var parts []string
	for _, g := range []struct {
		what  string
		paths []string
	}{{"modified", r.Modified}, {"missing", r.Missing}, {"extra", r.Extra}} {
		if len(g.paths) == 0 {
			continue
		}
		shown := g.paths[:min(3, len(g.paths))]
		s := fmt.Sprintf("%d %s (%s", len(g.paths), g.what, strings.Join(shown, ", "))
		if len(g.paths) > len(shown) {
			s += ", ..."
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, "; ")
}

func exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, rootfs.MetaDir))
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// HasRunner reports whether the root at dir holds this nsbox's compiled
// Python runner (pyrunner.CompiledPath); a root without it cannot run.
func HasRunner(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, pyrunner.CompiledPath()))
	return err == nil
}
