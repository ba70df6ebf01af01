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
// with build.CheckLock and writes the lock atomically.
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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
		if err := os.WriteFile(out, render(nil, prev), 0o600); err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
	}
	args := []string{"pip", "compile", "--quiet", "--no-config", "--generate-hashes",
		"--only-binary", ":all:", "--python", o.Python, "--python-version", t.Short,
		"--python-platform", t.Platform, "--no-python-downloads", "--no-header", "--no-annotate",
		"--color", "never", "-o", out}
	for _, f := range o.FindLinks {
		if !strings.Contains(f, "://") {
			if f, err = filepath.Abs(f); err != nil {
				return nil, fmt.Errorf("--find-links: %w", err)
			}
		}
		args = append(args, "--find-links", f)
	}
	if o.NoIndex {
		args = append(args, "--no-index")
	}
	if o.Offline {
		args = append(args, "--offline")
	}
	args = append(args, in)
	cmd := command(ctx, o.UV, args...)
	cmd.Env = uvEnv(os.Environ())
	cmd.Dir = tmp
	combined, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("resolve %s: %w", o.Requirements, ctx.Err())
		}
		return nil, uvError(o.Requirements, reqs, t, o.Offline, combined, err)
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
	data := render(header(o, t), pkgs)
	changed := !bytes.Equal(old, data)
	if changed {
		if err := writeLock(o.Lock, data); err != nil {
			return nil, err
		}
	}
	return &Result{Lock: o.Lock, Requirements: o.Requirements, Target: t, Packages: pkgs,
		Changed: changed, UV: o.UV, Elapsed: time.Since(start)}, nil
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

// render writes the header lines, then each entry as "name==version" and
// its hashes, sorted, one per continuation line.
func render(head []string, pkgs []build.Requirement) []byte {
	var b strings.Builder
	for _, h := range head {
		b.WriteString(h + "\n")
	}
	for _, p := range pkgs {
		b.WriteString(p.String())
		hashes := slices.Clone(p.Hashes)
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
