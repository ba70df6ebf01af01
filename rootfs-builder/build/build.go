// Package build builds a self-contained root filesystem for nsbox from a
// host interpreter and an optional hash-pinned lock (`nsbox rootfs build`).
//
// The root, mounted read-only as "/" by the sandbox, holds:
//   - the interpreter and its standard library at their host paths, with
//     the symlinks leading to them (e.g. /lib64 -> usr/lib64), without test
//     suites, idlelib, tkinter, turtle, ensurepip, the build support
//     (config-3.X-*), site-packages and Debian's dist-packages and
//     sitecustomize;
//   - a venv at /venv (pyvenv.cfg, bin/python -> the interpreter, and in
//     lib/python3.X/site-packages exactly the locked packages, installed by
//     pip from wheels only, hashes required, no dependency resolution);
//   - the ELF closure of the interpreter and of every extension module, as
//     ld.so resolves it (rootfs-builder/elfdeps), plus the dynamic loader;
//   - a .pyc for every .py, with unchecked-hash invalidation: the root is
//     read-only and such a pyc is used without looking at the source;
//   - a minimal /etc (passwd, group, hosts, nsswitch.conf, hostname) and
//     empty mount points /dev, /proc, /tmp and /workspace;
//   - no shell and no other program: the only executable files are ELF
//     objects, and bin directories hold only the interpreter;
//   - its manifest in /.nsbox (package rootfs).
//
// A build runs as root (every file is owned by root), under an exclusive
// flock of OUT.lock, in a sibling directory OUT.tmp-XXXX. At the end it
// becomes a new generation, OUT.gen-ID, and OUT, a symlink, is switched to
// it in one rename; generations no run holds any more are removed (see
// rootfs "Generations"). A failed build removes its directory and leaves
// OUT as it was.
package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// Options configure Build.
type Options struct {
	// Python is the host interpreter, an absolute path (e.g.
	// /usr/bin/python3.11). The same path is the interpreter inside the
	// root; /venv/bin/python links to it.
	Python string
	// Lock is the path of a hash-pinned requirements lock (see CheckLock);
	// "" builds a root with the standard library only, without network.
	Lock string
	// Out is the root to create or replace: a symlink to its current
	// generation. If it exists it must be such a symlink, a root an older
	// nsbox built in place (a directory with .nsbox/), or an empty
	// directory.
	Out string
	// Version is the nsbox version recorded in the manifest.
	Version string
	// Progress receives steps, file counts and the result; nil is quiet.
	Progress Reporter
	// PipCacheDir is pip's cache directory; "" uses pip's default cache,
	// so repeated builds download nothing.
	PipCacheDir string
	// Pip is the interpreter that runs pip (`PIP -m pip --python
	// OUT/venv/bin/python install ...`, pip 22.3 or newer). "" tries
	// Python, then python3 on PATH. Only used with a lock.
	Pip string
	// From makes a layered root (layer.go): the path of the parent root,
	// whose current generation's files the new root hard-links, adding
	// only Lock's packages. Python then defaults to the parent's.
	From string
	// FromName is the parent's built-in name, recorded in the manifest
	// ("" when From was given as a path).
	FromName string
}

// Build builds the root described by o into o.Out and returns its
// manifest. Errors name the file, line or package at fault.
func Build(ctx context.Context, o Options) (*rootfs.Manifest, error) {
	if o.Progress == nil {
		o.Progress = NewQuietReporter()
	}
	// The lock is checked before anything else, so that a bad entry
	// costs nothing and is reported with its line.
	var reqs []Requirement
	var lockData []byte
	if o.Lock != "" {
		o.Progress.Step("check lock")
		var err error
		if reqs, err = CheckLock(o.Lock); err != nil {
			return nil, err
		}
		if lockData, err = os.ReadFile(o.Lock); err != nil {
			return nil, fmt.Errorf("read lock: %w", err)
		}
	}
	var parent *parentRoot
	if o.From != "" {
		var err error
		if parent, err = openParent(&o); err != nil {
			return nil, err
		}
		defer parent.held.Close() // its generation stays until the child is in place
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	b := &builder{ctx: ctx, o: o, rep: o.Progress, reqs: reqs, lockData: lockData, parent: parent}
	if parent != nil {
		if err := parent.checkOut(o.Out); err != nil {
			return nil, err
		}
	}

	// One builder per OUT at a time; a concurrent build waits here.
	unlock, err := lockOut(ctx, o.Out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkReplaceable(o.Out); err != nil {
		return nil, err
	}
	// Holding the lock, any OUT.tmp-* is left over from a build that died;
	// generations runs have let go of since the last build go too, before
	// this one takes more space.
	if err := sweepStale(o.Out); err != nil {
		return nil, err
	}
	if _, err := sweepGenerations(o.Out, time.Now()); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.Out), filepath.Base(o.Out)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("create build directory: %w", err)
	}
	b.root = tmp
	swapped := false
	defer func() {
		if !swapped {
			os.RemoveAll(tmp)
		}
	}()

	m, err := b.assemble()
	if err != nil {
		return nil, err
	}
	b.rep.Step("switch to the new generation")
	gen, err := switchTo(tmp, o.Out)
	if err != nil {
		return nil, err
	}
	swapped = true
	// Runs of the previous generation keep it: it goes at a later build
	// or sweep, after they have ended.
	b.rep.Step("remove unused generations")
	kept, err := sweepGenerations(o.Out, time.Now())
	if err != nil {
		return nil, fmt.Errorf("new root in place at %s, but removing old generations failed: %w", o.Out, err)
	}
	b.rep.Done(Result{Manifest: m, Generation: gen, Kept: kept})
	return m, nil
}

// validate checks the options and makes Out absolute.
func (o *Options) validate() error {
	if !filepath.IsAbs(o.Python) {
		return fmt.Errorf("python %q: not an absolute path", o.Python)
	}
	fi, err := os.Stat(o.Python)
	if err != nil {
		return fmt.Errorf("python: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("python %s: not an executable file", o.Python)
	}
	// Every file of a root is owned by root, and the library check
	// chroots into it.
	if os.Geteuid() != 0 {
		return errors.New("building a root needs root: its files must be owned by root")
	}
	if o.Out == "" {
		return errors.New("no output directory")
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return fmt.Errorf("output directory %s: %w", o.Out, err)
	}
	if out == "/" {
		return errors.New("output directory /: refusing to replace the host's root")
	}
	o.Out = out
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create parent of output directory: %w", err)
	}
	return nil
}

// builder holds the state of one build.
type builder struct {
	ctx      context.Context
	o        Options
	rep      Reporter
	reqs     []Requirement         // nil without a lock
	lockData []byte                // the lock as given
	root     string                // the root being built: OUT.tmp-XXXX
	py       pyInfo                // what the interpreter says about itself
	trees    []string              // real host paths of the stdlib directories copied
	modules  []string              // host paths of the stdlib's ELF extension modules
	pip      string                // the interpreter that runs pip, once findPip found it
	parent   *parentRoot           // a layered root's parent, else nil
	linked   map[string]linkedFile // a layered root's files hard-linked from the parent, by path inside
}

// step is one step of a build.
type step struct {
	name string
	run  func() error
	skip bool
}

// assemble fills b.root, in order, and returns the manifest it wrote.
func (b *builder) assemble() (*rootfs.Manifest, error) {
	if b.parent != nil {
		return b.runSteps(b.layerSteps())
	}
	return b.runSteps([]step{
		// Ask the interpreter for its version and stdlib directories
		// rather than guess them from its path.
		{"inspect interpreter", b.inspect, false},
		// The stdlib first: the venv and pip run against the copy.
		{"copy standard library", b.copyStdlib, false},
		{"create venv", b.createVenv, false},
		// Packages before the libraries: their extension modules add to
		// the ELF closure.
		{"install packages", b.installPackages, b.reqs == nil},
		{"copy shared libraries", b.copyLibraries, false},
		// Fail closed: the root's loader must find every library inside
		// the root, as it will at run time.
		{"check shared libraries", b.checkLoadable, false},
		// After every .py is in place (pip ran with --no-compile).
		{"compile bytecode", b.compile, false},
		// nsbox's own Python runner, compiled for this interpreter.
		{"compile runner", b.compileRunner, false},
		{"build matplotlib font cache", b.matplotlibCache, b.reqs == nil}, // mplcache.go
		{"write /etc and mount points", b.writeEtc, false},
		// Last change to the tree: the manifest records final modes.
		{"normalize owners and modes", b.normalize, false},
	})
}

// runSteps runs steps in order, then writes the manifest and returns it.
func (b *builder) runSteps(steps []step) (*rootfs.Manifest, error) {
	for _, s := range steps {
		if s.skip {
			continue
		}
		if err := b.ctx.Err(); err != nil {
			return nil, fmt.Errorf("build stopped before %s: %w", s.name, context.Cause(b.ctx))
		}
		b.rep.Step(s.name)
		if err := s.run(); err != nil {
			if b.ctx.Err() != nil { // the step failed because the build was stopped
				return nil, fmt.Errorf("build stopped during %s: %w", s.name, context.Cause(b.ctx))
			}
			return nil, err
		}
		n, size, err := countFiles(b.root)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			b.rep.Files(n, size)
		}
	}
	b.rep.Step("write manifest")
	return b.writeManifest()
}

// inRoot returns the host path of p (absolute, inside the root) in the
// root being built.
func (b *builder) inRoot(p string) string {
	return filepath.Join(b.root, p)
}

// countFiles returns the number and total size of the regular files under
// dir.
func countFiles(dir string) (int, int64, error) {
	var n int
	var size int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("count files: %w", err)
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return fmt.Errorf("count files: %w", err)
			}
			n++
			size += fi.Size()
		}
		return nil
	})
	return n, size, err
}
