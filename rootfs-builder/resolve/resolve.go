// Package resolve turns a plain requirements list ("pandas",
// "seaborn>=0.13") into a lock that `nsbox rootfs build --lock` accepts:
// every package of the resolution pinned name==version with the sha256 of
// its wheels, no markers, no extras, no options (build.CheckLock).
//
// Resolution is uv's (`uv pip compile --generate-hashes --only-binary
// :all:`), a maintained resolver, not one of this package's own: this
// package checks the list, asks the root's interpreter what to resolve for
// (its Python version and ABI, its glibc, its machine: the lock must fit
// the root, not the host that runs the command), runs uv with an
// environment that cannot change what is resolved, turns uv's failures
// into errors naming the requirement and its line, checks uv's output
// with build.CheckLock and writes the lock atomically. uv runs twice: once
// to resolve, once (the exact pins, --no-deps, pylock.toml) to learn which
// wheels of each version the target installs, so the lock holds their
// hashes only, each wheel named in a comment, and no source distribution's.
//
// Re-locking is reproducible: the pins of the existing lock are given to
// uv as preferences, so an unchanged list keeps its versions and the
// output is byte-identical (a header that names the list by its relative
// path, no timestamps, entries sorted by name, hashes sorted).
package resolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/nsbox/nsbox/rootfs-builder/build"
)

// DefaultPython is the interpreter of nsbox's built-in roots.
const DefaultPython = "/usr/bin/python3.11"

// Options says what to lock and how.
type Options struct {
	Requirements string   // the requirements list (see ReadRequirements)
	Lock         string   // the lock to write; its pins, when it exists, are preferences
	Python       string   // the root's interpreter (default DefaultPython)
	UV           string   // the uv to run (see FindUV); required
	FindLinks    []string // directories or URLs of wheels, besides the index
	NoIndex      bool     // use FindLinks only, not the package index
	Offline      bool     // no network: uv's cache and FindLinks only
	Upgrade      bool     // ignore the existing lock's pins
}

// Result is what Lock did.
type Result struct {
	Lock         string              `json:"lock"`
	Requirements string              `json:"requirements"`
	Target       Target              `json:"target"`
	Packages     []build.Requirement `json:"-"`
	Changed      bool                `json:"changed"` // the lock's content differs from before
	UV           string              `json:"uv"`
	Elapsed      time.Duration       `json:"-"`
}

// Lock resolves o.Requirements for o.Python's target with uv and writes
// the lock to o.Lock.
func Lock(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if o.Python == "" {
		o.Python = DefaultPython
	}
	switch {
	case o.Requirements == "":
		return nil, errors.New("no requirements file")
	case o.Lock == "":
		return nil, errors.New("no lock file to write (-o)")
	case o.UV == "":
		return nil, errors.New("no uv (see FindUV)")
	}
	reqs, err := ReadRequirements(o.Requirements)
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(o.Lock)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return nil, fmt.Errorf("read the existing lock: %w", err)
	default:
		// Fail closed: never overwrite a file that is not a lock.
		if _, err := build.CheckLock(o.Lock); err != nil {
			return nil, fmt.Errorf("%s exists and is not a lock nsbox accepts (remove it or choose another -o): %w", o.Lock, err)
		}
	}
	t, err := InspectTarget(ctx, o.Python)
	if err != nil {
		return nil, err
	}

	tmp, err := os.MkdirTemp("", "nsbox-lock-")
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	defer os.RemoveAll(tmp)
	in := filepath.Join(tmp, "requirements.in")
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.Text + "\n")
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	// uv reads the pins of its output file, when it exists, as
	// preferences: the existing lock, rendered without its header.
	out := filepath.Join(tmp, "requirements.txt")
	if old != nil && !o.Upgrade {
		prev, err := build.CheckLock(o.Lock)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(out, render(nil, prev, nil), 0o600); err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
	}
	// Pass 1 resolves the list to one version of every package.
	if _, err := o.uv(ctx, t, "-o", out, in); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("resolve %s: %w", o.Requirements, ctx.Err())
		}
		return nil, uvError(o.Requirements, reqs, t, o.Offline, err.out, err.err)
	}
	pkgs, err := build.CheckLock(out)
	if err != nil {
		return nil, fmt.Errorf("uv's output is not a lock nsbox accepts: %w", err)
	}
	for _, r := range reqs {
		if strings.Contains(r.Text, ";") {
			continue // its marker may exclude it on this target
		}
		if !slices.ContainsFunc(pkgs, func(p build.Requirement) bool { return normalize(p.Name) == normalize(r.Name) }) {
			return nil, &build.LockError{File: o.Requirements, Line: r.Line, Package: r.Name, Reason: "missing from uv's resolution"}
		}
	}
	// Pass 2 lists, for those exact versions, the wheels the target can
	// install (pylock.toml names each file): pass 1's hashes also cover
	// the source distribution and every other platform's wheels.
	wheels, err := o.targetWheels(ctx, t, tmp, pkgs)
	if err != nil {
		return nil, err
	}
	data := render(header(o, t), pkgs, wheels)
	changed := !bytes.Equal(old, data)
	if changed {
		if err := writeLock(o.Lock, data); err != nil {
			return nil, err
		}
	}
	return &Result{Lock: o.Lock, Requirements: o.Requirements, Target: t, Packages: pkgs,
		Changed: changed, UV: o.UV, Elapsed: time.Since(start)}, nil
}

// uvFailure is a failed uv run: its error and its output.
type uvFailure struct {
	err error
	out []byte
}

// uv runs `uv pip compile` for the target with the options every run
// shares, then args.
func (o Options) uv(ctx context.Context, t Target, args ...string) ([]byte, *uvFailure) {
	all := []string{"pip", "compile", "--quiet", "--no-config", "--generate-hashes",
		"--only-binary", ":all:", "--python", o.Python, "--python-version", t.Short,
		"--python-platform", t.Platform, "--no-python-downloads", "--no-header", "--no-annotate",
		"--color", "never"}
	for _, f := range o.FindLinks {
		if !strings.Contains(f, "://") {
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, &uvFailure{err: fmt.Errorf("--find-links %s: %w", f, err)}
			}
			f = abs
		}
		all = append(all, "--find-links", f)
	}
	if o.NoIndex {
		all = append(all, "--no-index")
	}
	if o.Offline {
		all = append(all, "--offline")
	}
	cmd := command(ctx, o.UV, append(all, args...)...)
	cmd.Env = uvEnv(os.Environ())
	cmd.Dir = filepath.Dir(args[len(args)-1])
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, &uvFailure{err: err, out: out}
	}
	return out, nil
}

// wheel is one file of a pinned package.
type wheel struct {
	File   string // its file name, e.g. numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl
	SHA256 string // hex digest
}

// pylock is the part of uv's pylock.toml output that targetWheels reads.
type pylock struct {
	Packages []struct {
		Name    string `toml:"name"`
		Version string `toml:"version"`
		Wheels  []struct {
			Name   string            `toml:"name"`
			URL    string            `toml:"url"`
			Path   string            `toml:"path"`
			Hashes map[string]string `toml:"hashes"`
		} `toml:"wheels"`
	} `toml:"packages"`
}

// targetWheels asks uv for the wheels of each pin that the target can
// install, by normalised name.
func (o Options) targetWheels(ctx context.Context, t Target, tmp string, pkgs []build.Requirement) (map[string][]wheel, error) {
	pinned := filepath.Join(tmp, "pinned.in")
	var b strings.Builder
	for _, p := range pkgs {
		b.WriteString(p.String() + "\n")
	}
	if err := os.WriteFile(pinned, []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	out := filepath.Join(tmp, "pylock.wheels.toml")
	if _, err := o.uv(ctx, t, "--no-deps", "--format", "pylock.toml", "-o", out, pinned); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("list the wheels: %w", ctx.Err())
		}
		return nil, fmt.Errorf("list the wheels of the resolution: uv pip compile: %v\n%s", err.err, lastLines(err.out, 30))
	}
	var lock pylock
	if _, err := toml.DecodeFile(out, &lock); err != nil {
		return nil, fmt.Errorf("read uv's pylock.toml: %w", err)
	}
	found := map[string][]wheel{}
	for _, p := range lock.Packages {
		for _, w := range p.Wheels {
			file := w.Name
			for _, loc := range []string{w.URL, w.Path} {
				if file == "" && loc != "" {
					file = path.Base(loc)
					if u, err := url.PathUnescape(file); err == nil {
						file = u
					}
				}
			}
			h := w.Hashes["sha256"]
			if !strings.HasSuffix(file, ".whl") || len(h) != 64 {
				return nil, fmt.Errorf("uv's pylock.toml: %s %s: wheel %q with sha256 %q", p.Name, p.Version, file, h)
			}
			found[normalize(p.Name)] = append(found[normalize(p.Name)], wheel{File: file, SHA256: h})
		}
	}
	for _, p := range pkgs {
		ws := found[normalize(p.Name)]
		if len(ws) == 0 {
			return nil, fmt.Errorf("%s: uv lists no wheel for %s", p, t)
		}
		for _, w := range ws {
			if !slices.Contains(p.Hashes, "sha256:"+w.SHA256) {
				return nil, fmt.Errorf("%s: wheel %s has sha256 %s, which the resolution's hashes do not list", p, w.File, w.SHA256)
			}
		}
		slices.SortFunc(ws, func(a, b wheel) int { return strings.Compare(a.File, b.File) })
		found[normalize(p.Name)] = ws
	}
	return found, nil
}

// header is the lock's first lines: what made it, from which list, for
// which target. Nothing in it changes between runs on the same inputs.
func header(o Options, t Target) []string {
	src := filepath.Base(o.Requirements)
	if absReq, err := filepath.Abs(o.Requirements); err == nil {
		if absLock, err := filepath.Abs(o.Lock); err == nil {
			if rel, err := filepath.Rel(filepath.Dir(absLock), absReq); err == nil {
				src = rel
			}
		}
	}
	return []string{
		"# Generated by `nsbox rootfs lock` from " + src + " (relative to this file); do not edit:",
		"# change the list and run the command again. Wheels only, for " + t.String() + " (" + t.ABI + ").",
	}
}

// render writes the header lines, then each entry: a comment naming its
// wheels, "name==version" and their hashes, one per continuation line.
// Without wheels (the existing lock given to uv as preferences) every
// hash of the entry is written.
func render(head []string, pkgs []build.Requirement, wheels map[string][]wheel) []byte {
	var b strings.Builder
	for _, h := range head {
		b.WriteString(h + "\n")
	}
	for _, p := range pkgs {
		hashes := slices.Clone(p.Hashes)
		if ws, ok := wheels[normalize(p.Name)]; ok {
			hashes = hashes[:0]
			for _, w := range ws {
				b.WriteString("# " + w.File + "\n")
				hashes = append(hashes, "sha256:"+w.SHA256)
			}
		}
		b.WriteString(p.String())
		slices.Sort(hashes)
		for _, h := range slices.Compact(hashes) {
			b.WriteString(" \\\n    --hash=" + h)
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// writeLock writes data to path through a temporary file in the same
// directory, checked with build.CheckLock, synced and renamed over path.
func writeLock(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write lock %s: %w", tmp, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write lock %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write lock %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write lock %s: %w", tmp, err)
	}
	if _, err := build.CheckLock(tmp); err != nil {
		return fmt.Errorf("the lock written is refused by the lock check: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	ok = true
	return nil
}
