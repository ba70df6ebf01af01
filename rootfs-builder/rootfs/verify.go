package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// Report is the outcome of Verify: paths inside the root, each list sorted
// and never nil. The metadata files are reported as "/.nsbox/NAME".
type Report struct {
	Missing  []string `json:"missing"`  // in the manifest, not in the tree
	Modified []string `json:"modified"` // type, mode, size, content or link target differ
	Extra    []string `json:"extra"`    // in the tree, not in the manifest
}

// OK reports whether the root matches its manifest exactly.
func (r Report) OK() bool {
	return len(r.Missing) == 0 && len(r.Modified) == 0 && len(r.Extra) == 0
}

// Verify is the full check: it re-hashes every file under dir (in
// parallel) and compares type, mode, size, sha256 and link target with the
// manifest, and lists the files the manifest does not know. It also checks
// the metadata: the header's manifest digest and critical entries, and the
// lock file's digest.
//
// An error means the root could not be verified at all (no readable
// manifest, an unreadable file); differences are in the Report.
func Verify(dir string) (Report, error) {
	r := Report{Missing: []string{}, Modified: []string{}, Extra: []string{}}
	// The walk does not follow symlinks, a root's own path included (a
	// root managed in generations is a symlink to the current one).
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return r, fmt.Errorf("rootfs: verify: %w", err)
	}
	m, err := Load(dir)
	if err != nil {
		return r, err
	}
	got, err := scan(dir)
	if err != nil {
		return r, err
	}
	want := m.Files
	for len(want) > 0 || len(got) > 0 {
		switch {
		case len(got) == 0 || len(want) > 0 && want[0].Path < got[0].Path:
			r.Missing = append(r.Missing, want[0].Path)
			want = want[1:]
		case len(want) == 0 || got[0].Path < want[0].Path:
			r.Extra = append(r.Extra, got[0].Path)
			got = got[1:]
		default:
			if differs(want[0], got[0], true) != "" {
				r.Modified = append(r.Modified, got[0].Path)
			}
			want, got = want[1:], got[1:]
		}
	}
	if err := verifyMeta(dir, m, &r); err != nil {
		return r, err
	}
	slices.Sort(r.Missing)
	slices.Sort(r.Modified)
	slices.Sort(r.Extra)
	return r, nil
}

// verifyMeta adds the metadata files that do not match to r: the header
// (its manifest digest and its critical entries against the manifest's),
// the lock file, and anything else in MetaDir.
func verifyMeta(dir string, m *Manifest, r *Report) error {
	meta := filepath.Join(dir, MetaDir)
	name := func(f string) string { return path.Join("/", MetaDir, f) }
	buf := make([]byte, 64<<10)

	switch h, err := readHeader(dir); {
	case errors.Is(err, fs.ErrNotExist):
		r.Missing = append(r.Missing, name(HeaderFile))
	case err != nil:
		r.Modified = append(r.Modified, name(HeaderFile))
	default:
		sum, _, err := hashFile(filepath.Join(meta, ManifestFile), buf)
		if err != nil {
			return fmt.Errorf("rootfs: verify root %s: %w", dir, err)
		}
		if sum != h.ManifestSHA256 {
			r.Modified = append(r.Modified, name(ManifestFile))
		}
		if !headerMatches(h, m) {
			r.Modified = append(r.Modified, name(HeaderFile))
		}
	}

	lock := filepath.Join(meta, LockFile)
	sum, _, err := hashFile(lock, buf)
	switch {
	case errors.Is(err, fs.ErrNotExist) && m.Lock != nil:
		r.Missing = append(r.Missing, name(LockFile))
	case errors.Is(err, fs.ErrNotExist):
	case err != nil && m.Lock != nil:
		r.Modified = append(r.Modified, name(LockFile)) // e.g. replaced by a symlink (ELOOP)
	case m.Lock == nil:
		r.Extra = append(r.Extra, name(LockFile))
	case sum != m.Lock.SHA256:
		r.Modified = append(r.Modified, name(LockFile))
	}

	entries, err := os.ReadDir(meta)
	if err != nil {
		return fmt.Errorf("rootfs: verify root %s: %w", dir, err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ManifestFile, HeaderFile, LockFile:
		default:
			r.Extra = append(r.Extra, name(e.Name()))
		}
	}
	return nil
}

// headerMatches reports whether the header agrees with the manifest: the
// same interpreter, and every critical entry equal to its manifest entry.
func headerMatches(h *Header, m *Manifest) bool {
	if h.Python.Path != m.Python.Path || h.Python.Version != m.Python.Version {
		return false
	}
	for _, c := range h.Critical {
		f, ok := m.find(c.Path)
		if !ok || differs(f, c, false) != "" || c.SHA256 != "" {
			return false
		}
	}
	return true
}
