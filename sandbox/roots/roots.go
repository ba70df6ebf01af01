// Package roots finds the root filesystem a policy names and checks it
// before a run. A policy gives either a built-in root name, resolved in
// the roots directory (Dir), or the absolute path of a root built by
// `nsbox rootfs build`.
//
// The built-in "base" root (the standard library of the host's
// /usr/bin/python3.11, no packages) is built on first use and cached, so a
// fresh machine needs no preparation step. "datasci" needs packages from
// PyPI and is built on purpose (`make datasci`); a run that names it before
// it exists is refused with the command that builds it.
package roots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/rootfs-builder/build"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// DefaultDir holds the built-in roots; NSBOX_ROOTS_DIR overrides it. It is
// separate from the state directory so that runs with their own state
// directories (tests, several users of one host) share one base root.
const DefaultDir = "/var/lib/nsbox/roots"

// BasePython is the host interpreter the base root is built from.
const BasePython = "/usr/bin/python3.11"

// Dir returns the roots directory.
func Dir() string {
	if d := os.Getenv("NSBOX_ROOTS_DIR"); d != "" {
		return d
	}
	return DefaultDir
}

// Root is a checked root filesystem.
type Root struct {
	Dir    string         // the root's directory on the host
	Header *rootfs.Header // its header: interpreter path inside, critical files
}

// Options tune Open.
type Options struct {
	Verify  string // policies.VerifyQuick or policies.VerifyFull
	Version string // nsbox version, recorded when base is built
	Log     io.Writer
}

// Open resolves the policy's root, builds base if it is missing, and
// checks the root against its manifest: quickly (manifest hash, critical
// files) or, with VerifyFull, by re-hashing every file.
func Open(ctx context.Context, nameOrPath string, o Options) (*Root, error) {
	dir := nameOrPath
	if slices.Contains(policies.BuiltinRoots, nameOrPath) {
		dir = filepath.Join(Dir(), nameOrPath)
		if err := ensureBuiltin(ctx, nameOrPath, dir, o); err != nil {
			return nil, err
		}
	}
	hdr, err := rootfs.Check(dir) // its errors name the root and the file
	if err != nil {
		return nil, err
	}
	if o.Verify == policies.VerifyFull {
		rep, err := rootfs.Verify(dir)
		if err != nil {
			return nil, fmt.Errorf("verify root %s: %w", dir, err)
		}
		if !rep.OK() {
			return nil, fmt.Errorf("root %s does not match its manifest: %s (rebuild it, or run `nsbox rootfs verify %s`)", dir, summary(rep), dir)
		}
	}
	return &Root{Dir: dir, Header: hdr}, nil
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

// ensureBuiltin makes sure the built-in root name exists at dir, building
// base under a lock when it does not (concurrent first runs build once).
func ensureBuiltin(ctx context.Context, name, dir string, o Options) error {
	if exists(dir) && (name != "base" || hasRunner(dir)) {
		return nil
	}
	if name != "base" {
		return fmt.Errorf("built-in root %q is not built yet at %s: build it with `make %s` (or `nsbox rootfs build --python %s --lock policies/%s.lock --out %s`)",
			name, dir, name, BasePython, name, dir)
	}
	if err := os.MkdirAll(Dir(), 0o755); err != nil {
		return fmt.Errorf("create roots dir %s: %w", Dir(), err)
	}
	lockPath := filepath.Join(Dir(), ".build-"+name+".lock")
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", lockPath, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lockPath, err)
	}
	// Someone else may have built it while this run waited for the lock.
	if exists(dir) && hasRunner(dir) {
		return nil
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	why := "first use"
	if exists(dir) {
		why = "its Python runner is from another nsbox version"
	}
	fmt.Fprintf(log, "nsbox: building the base root (%s) from %s into %s\n", why, BasePython, dir)
	_, err = build.Build(ctx, build.Options{Python: BasePython, Out: dir, Version: o.Version, Progress: build.NewQuietReporter()})
	if err != nil {
		return fmt.Errorf("build base root into %s: %w", dir, err)
	}
	fmt.Fprintf(log, "nsbox: base root ready\n")
	return nil
}

func exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, rootfs.MetaDir))
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// hasRunner reports whether the root holds this nsbox's compiled runner.
// base is rebuilt (about a second) when it does not: a root built by an
// older nsbox still runs, but compiles the runner from source every time.
func hasRunner(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, pyrunner.CompiledPath()))
	return err == nil
}
