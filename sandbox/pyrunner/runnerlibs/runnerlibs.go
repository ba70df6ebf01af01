// Package runnerlibs holds the one Python library the runner uses besides
// the standard library: RestrictedPython, whose compiler rewrites a program
// under python.mode "restricted" (runner/restricted.py). Its pure-Python
// wheel is vendored here and pinned by sha256 in runnerlibs.lock; every
// root gets a copy (Extract, called by the rootfs builder through
// pyrunner.InstallLib), offline, since the base root is built without
// pip. Re-pin with scripts/pin-runnerlibs.sh.
package runnerlibs

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

//go:embed runnerlibs.lock *.whl
var files embed.FS

// Package is the top-level package the wheel installs; the only part of
// the wheel extracted, with its licence.
const Package = "RestrictedPython"

// Pin is the library named and pinned by runnerlibs.lock.
type Pin struct {
	Name    string // as in the lock: RestrictedPython
	Version string // 9.0
	SHA256  string // of the wheel, lowercase hex
	Wheel   string // the vendored file's name
}

// Lock parses runnerlibs.lock: comments, and exactly one line
// `Name==Version --hash=sha256:HEX`.
func Lock() (Pin, error) {
	data, err := files.ReadFile("runnerlibs.lock")
	if err != nil {
		return Pin{}, fmt.Errorf("runnerlibs: read runnerlibs.lock: %w", err)
	}
	var pins []Pin
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		spec, hash, ok := strings.Cut(line, " --hash=sha256:")
		name, version, ok2 := strings.Cut(spec, "==")
		if !ok || !ok2 || name == "" || version == "" || len(hash) != 64 || strings.ToLower(hash) != hash {
			return Pin{}, fmt.Errorf("runnerlibs: runnerlibs.lock line %d: want `Name==Version --hash=sha256:<64 lowercase hex>`, got %q", i+1, line)
		}
		if _, err := hex.DecodeString(hash); err != nil {
			return Pin{}, fmt.Errorf("runnerlibs: runnerlibs.lock line %d: hash: %w", i+1, err)
		}
		pins = append(pins, Pin{Name: name, Version: version, SHA256: hash,
			Wheel: strings.ToLower(name) + "-" + version + "-py3-none-any.whl"})
	}
	if len(pins) != 1 || pins[0].Name != Package {
		return Pin{}, fmt.Errorf("runnerlibs: runnerlibs.lock: want exactly one pin, of %s", Package)
	}
	return pins[0], nil
}

// Wheel returns the vendored wheel's bytes after checking them against
// the lock's hash: a wheel that does not match is never used.
func Wheel() (Pin, []byte, error) {
	pin, err := Lock()
	if err != nil {
		return Pin{}, nil, err
	}
	data, err := files.ReadFile(pin.Wheel)
	if err != nil {
		return Pin{}, nil, fmt.Errorf("runnerlibs: the lock pins %s==%s but %s is not vendored: %w",
			pin.Name, pin.Version, pin.Wheel, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != pin.SHA256 {
		return Pin{}, nil, fmt.Errorf("runnerlibs: %s: sha256 %s, but runnerlibs.lock pins %s", pin.Wheel, got, pin.SHA256)
	}
	return pin, data, nil
}

// Digest is the pinned wheel's sha256 (lowercase hex), or the error that
// makes the vendored wheel unusable.
func Digest() (string, error) {
	pin, _, err := Wheel()
	return pin.SHA256, err
}

// Extract writes the package's .py files (and the wheel's licence, as
// LICENSE.txt) under dst, which must not exist yet: dst/RestrictedPython/...
// Nothing outside the package directory is taken from the wheel.
func Extract(dst string) error {
	pin, data, err := Wheel()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("runnerlibs: open %s: %w", pin.Wheel, err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("runnerlibs: mkdir %s: %w", dst, err)
	}
	licence := fmt.Sprintf("%s-%s.dist-info/licenses/LICENSE.txt", strings.ToLower(pin.Name), pin.Version)
	n := 0
	for _, f := range zr.File {
		name := f.Name
		var out string
		switch {
		case name == licence:
			out = filepath.Join(dst, "LICENSE.txt")
		case strings.HasPrefix(name, Package+"/") && strings.HasSuffix(name, ".py"):
			clean := path.Clean(name)
			if clean != name || strings.Contains(name, "..") || strings.Count(name, "/") != 1 {
				return fmt.Errorf("runnerlibs: %s: unexpected member %q", pin.Wheel, name)
			}
			out = filepath.Join(dst, filepath.FromSlash(name))
			n++
		default:
			continue
		}
		if err := writeMember(f, out); err != nil {
			return fmt.Errorf("runnerlibs: %s: %w", pin.Wheel, err)
		}
	}
	if n == 0 {
		return fmt.Errorf("runnerlibs: %s has no %s/*.py", pin.Wheel, Package)
	}
	return nil
}

func writeMember(f *zip.File, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", filepath.Dir(out), err)
	}
	r, err := f.Open()
	if err != nil {
		return fmt.Errorf("open member %s: %w", f.Name, err)
	}
	defer r.Close()
	w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	if _, err := io.Copy(w, io.LimitReader(r, 1<<20)); err != nil {
		w.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close %s: %w", out, err)
	}
	return nil
}
