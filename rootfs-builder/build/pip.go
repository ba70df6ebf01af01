package build

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// pipEnvKeep are the PIP_* variables passed to pip: where and how to
// download. Others (PIP_TARGET, PIP_PREFIX, PIP_USER, PIP_NO_BINARY,
// PIP_CONSTRAINT, ...) would change what is installed or where, and are
// dropped, as are PYTHON* (PYTHONPATH would reach the target interpreter).
var pipEnvKeep = []string{
	"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_FIND_LINKS",
	"PIP_TRUSTED_HOST", "PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY",
	"PIP_TIMEOUT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_KEYRING_PROVIDER",
	"PIP_CACHE_DIR", "PIP_NO_CACHE_DIR", "PIP_CONFIG_FILE",
}

// installPackages installs exactly the locked packages into the venv with
// the host's pip, run against the venv's interpreter (--python): wheels
// only (no package build code runs), every download checked against the
// lock's hashes, no dependency resolution (the lock is complete), no
// bytecode (compile makes unchecked-hash pycs for everything later).
func (b *builder) installPackages() error {
	pip, err := b.findPip()
	if err != nil {
		return err
	}
	// pip reads a rendering of the checked entries, not the lock itself,
	// so it sees nothing CheckLock did not accept. MetaDir is not part of
	// the root's content and is rewritten by the manifest step.
	scratch := b.inRoot("/" + rootfs.MetaDir)
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	lock := filepath.Join(scratch, "pip-requirements.txt")
	if err := os.WriteFile(lock, pipLock(b.reqs), 0o600); err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	if err := b.pipInstall(pip, scratch, lock); err != nil {
		return err
	}
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	// Console scripts name the build directory in their #! line and
	// could not run anyway; /venv/bin keeps the interpreter only.
	if err := b.pruneVenvBin(); err != nil {
		return err
	}
	return b.checkInstalled()
}

// pipInstall runs pip in scratch to install exactly the entries of lock
// into the venv (extra options before them, e.g. a staging --root): wheels
// only, hashes required, no dependency resolution, no bytecode.
func (b *builder) pipInstall(pip, scratch, lock string, extra ...string) error {
	args := append([]string{"-m", "pip", "--python", b.inRoot("/venv/bin/python"), "install"}, extra...)
	args = append(args, "--require-hashes", "--only-binary=:all:", "--no-deps", "--no-compile",
		"--no-input", "--disable-pip-version-check", "--root-user-action=ignore",
		"--no-warn-script-location", "-r", lock)
	if b.o.PipCacheDir != "" {
		args = append(args, "--cache-dir", b.o.PipCacheDir)
	}
	cmd := b.command(pip, args...)
	cmd.Env = pipEnv(os.Environ())
	cmd.Dir = scratch
	if out, err := cmd.CombinedOutput(); err != nil {
		return b.pipError(pip, out, err)
	}
	return nil
}

// findPip returns the interpreter that runs pip: Options.Pip, or the first
// of Options.Python and python3 on PATH that has pip.
func (b *builder) findPip() (string, error) {
	if b.pip != "" {
		return b.pip, nil
	}
	cands := []string{b.o.Pip}
	if b.o.Pip == "" {
		cands = []string{b.o.Python}
		if p, err := exec.LookPath("python3"); err == nil {
			cands = append(cands, p)
		}
	}
	for _, c := range cands {
		cmd := b.command(c, "-m", "pip", "--version")
		cmd.Env = pipEnv(os.Environ())
		if cmd.Run() == nil {
			b.pip = c
			return c, nil
		}
	}
	return "", fmt.Errorf("install packages: no pip: `PYTHON -m pip --version` failed for %s; install pip (22.3 or newer) for one of them or name its interpreter in Options.Pip",
		strings.Join(cands, " and "))
}

// pipEnv filters env for pip (see pipEnvKeep).
func pipEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PYTHON") || strings.HasPrefix(k, "PIP_") && !slices.Contains(pipEnvKeep, k) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
}

var (
	noDistRe   = lazyRegexp(`No matching distribution found for ([A-Za-z0-9._-]+)`)
	badHashRe  = lazyRegexp(`(?m)^\s+([A-Za-z0-9._-]+)==\S+ from `)
	hashHeadRe = lazyRegexp(`DO NOT MATCH THE HASHES`)
)

// pipError turns a failed pip run into an error naming the lock entry at
// fault when pip's output names one, followed by the end of that output.
func (b *builder) pipError(pip string, out []byte, runErr error) error {
	tail := lastLines(out, 25)
	var lerr *LockError
	switch m := noDistRe().FindSubmatch(out); {
	case m != nil:
		lerr = b.lockError(string(m[1]), "no wheel for this interpreter and platform on the index: the version may not exist, or it has only a source distribution (source builds are refused)")
	case hashHeadRe().Match(out):
		if m := badHashRe().FindSubmatch(out); m != nil {
			lerr = b.lockError(string(m[1]), "the downloaded wheel's sha256 is none of the lock's hashes")
		}
	}
	if lerr != nil {
		return fmt.Errorf("%w\npip output (end):\n%s", lerr, tail)
	}
	return fmt.Errorf("install packages: %s -m pip install: %w\npip output (end):\n%s", pip, runErr, tail)
}

// lockError is a LockError for the lock entry of the named package.
func (b *builder) lockError(name, reason string) *LockError {
	e := &LockError{File: b.o.Lock, Package: name, Reason: reason}
	for _, r := range b.reqs {
		if normalize(r.Name) == normalize(name) {
			e.Line, e.Package = r.Line, r.Name
		}
	}
	if e.Line == 0 {
		e.Reason = name + ": " + reason
	}
	return e
}

// lastLines returns the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pruneVenvBin removes from /venv/bin everything but the interpreter's
// links.
func (b *builder) pruneVenvBin() error {
	dir := b.inRoot("/venv/bin")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("install packages: %w", err)
	}
	for _, e := range entries {
		if !slices.Contains(b.venvBin(), e.Name()) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("install packages: %w", err)
			}
		}
	}
	return nil
}

// checkInstalled compares the distributions in site-packages (their
// *.dist-info/METADATA) with the lock: the same names, the same versions,
// nothing more.
func (b *builder) checkInstalled() error { return b.checkDists(b.reqs) }

// checkDists compares the distributions in site-packages with reqs: the
// same names, the same versions, nothing more.
func (b *builder) checkDists(reqs []Requirement) error {
	sp := b.inRoot(b.sitePackages())
	entries, err := os.ReadDir(sp)
	if err != nil {
		return fmt.Errorf("check installed packages: %w", err)
	}
	want := map[string]Requirement{}
	for _, r := range reqs {
		want[normalize(r.Name)] = r
	}
	for _, e := range entries {
		switch {
		case strings.HasSuffix(e.Name(), ".egg-info"):
			return fmt.Errorf("check installed packages: %s: not installed from a wheel", filepath.Join(b.sitePackages(), e.Name()))
		case !strings.HasSuffix(e.Name(), ".dist-info"):
			continue
		}
		name, version, err := readMetadata(filepath.Join(sp, e.Name(), "METADATA"))
		if err != nil {
			return fmt.Errorf("check installed packages: %w", err)
		}
		r, ok := want[normalize(name)]
		if !ok {
			return fmt.Errorf("check installed packages: site-packages holds %s %s, which the lock does not list", name, version)
		}
		if canonicalVersion(version) != canonicalVersion(r.Version) {
			return &LockError{File: b.o.Lock, Line: r.Line, Package: r.Name,
				Reason: fmt.Sprintf("pip installed version %s, the lock pins %s", version, r.Version)}
		}
		delete(want, normalize(name))
	}
	for _, r := range reqs {
		if _, missing := want[normalize(r.Name)]; !missing {
			continue
		}
		return &LockError{File: b.o.Lock, Line: r.Line, Package: r.Name, Reason: "pip reported success but the package is not in site-packages"}
	}
	return nil
}

// readMetadata returns the Name and Version headers of a METADATA file.
func readMetadata(path string) (name, version string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() && sc.Text() != "" { // headers end at the first blank line
		k, v, _ := strings.Cut(sc.Text(), ":")
		switch strings.ToLower(k) {
		case "name":
			name = strings.TrimSpace(v)
		case "version":
			version = strings.TrimSpace(v)
		}
	}
	if name == "" || version == "" {
		return "", "", errors.New(path + ": no Name or Version header")
	}
	return name, version, nil
}

// canonicalVersion is enough of PEP 440 normalisation to compare a pin
// with what was installed: lower case, no leading "v", trailing ".0"
// release segments dropped ("1.16" == "1.16.0").
func canonicalVersion(v string) string {
	v = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(v)), "v")
	end := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end < 0 {
		end = len(v)
	}
	release, rest := v[:end], v[end:]
	if strings.HasSuffix(release, ".") { // "1.0.post1": the dot separates the suffix
		release, rest = release[:len(release)-1], "."+rest
	}
	for strings.HasSuffix(release, ".0") {
		release = strings.TrimSuffix(release, ".0")
	}
	return release + rest
}
