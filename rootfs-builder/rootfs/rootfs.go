// Package rootfs describes a root filesystem built by `nsbox rootfs build`
// and checks it against its manifest. It is the light half of the
// rootfs-builder: standard library only, used by every `nsbox run`.
//
// A root is a directory DIR that the sandbox mounts read-only as "/". Its
// metadata lives in DIR/.nsbox (MetaDir), which is not part of the root's
// content:
//
//	manifest.json  every path under DIR (except .nsbox): type, mode, size,
//	               sha256 of files, target of symlinks; the interpreter,
//	               the lock and the build (Manifest)
//	root.json      a small header read on every run: the sha256 of
//	               manifest.json, the interpreter path inside the root and
//	               the critical files with their size and mode (Header)
//	lock.txt       the lock file the packages were installed from, as given
//	               (absent for a stdlib-only root)
//
// There are two checks. Check is cheap and runs before every run: it
// hashes manifest.json and lstats the critical files (the interpreter, the
// dynamic loader, libc, os.py, site.py and the directories and symlinks
// leading to them). Verify re-hashes every file and lists what is missing,
// modified or extra.
//
// Neither check has a trusted anchor: whoever can write DIR can rewrite
// the manifest and the header too. They detect damage and tampering by
// anything that does not also rewrite the metadata; pinning the manifest
// hash elsewhere (a policy) would close that gap.
package rootfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// MetaDir is the directory under the root that holds its metadata.
const MetaDir = ".nsbox"

// Names of the files in MetaDir.
const (
	ManifestFile = "manifest.json"
	HeaderFile   = "root.json"
	LockFile     = "lock.txt"
)

// FormatVersion is the version of the manifest and header formats this
// package writes and reads.
const FormatVersion = 1

// File types.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	// TypeOther is a device, fifo or socket. A built root never holds
	// one; Verify reports one it finds as modified or extra.
	TypeOther = "other"
)

// ErrMismatch is wrapped by every error that reports a root not matching
// its manifest (as opposed to a root that cannot be read at all).
var ErrMismatch = errors.New("root does not match its manifest")

// File is one path under the root.
type File struct {
	Path   string `json:"path"`             // absolute path inside the root, e.g. "/usr/bin/python3.11"
	Type   string `json:"type"`             // TypeFile, TypeDir or TypeSymlink
	Mode   uint32 `json:"mode"`             // permission bits, with setuid (04000), setgid (02000), sticky (01000)
	Size   int64  `json:"size"`             // bytes for a file, length of the target for a symlink, 0 for a directory
	SHA256 string `json:"sha256,omitempty"` // hex digest of a file's content
	Target string `json:"target,omitempty"` // a symlink's link text
}

// Python is the interpreter of a root.
type Python struct {
	// Path is the absolute path inside the root that nsbox execs, e.g.
	// "/venv/bin/python".
	Path string `json:"path"`
	// Version is the interpreter's version, e.g. "3.11.2".
	Version string `json:"version"`
	// Host is the host interpreter the root was built from (manifest
	// only; empty in the header).
	Host string `json:"host,omitempty"`
}

// Lock is the package lock a root was built from.
type Lock struct {
	SHA256   string   `json:"sha256"`   // hex digest of DIR/.nsbox/lock.txt
	Packages []string `json:"packages"` // "numpy==2.1.3", sorted by name
}

// Parent is the root a layered root was built from (`nsbox rootfs build
// --from`): the layered root's files are hard links to that generation's,
// except for what its own lock added.
type Parent struct {
	Name           string `json:"name,omitempty"`  // the built-in root's name, when it was given by name
	Path           string `json:"path"`            // the parent root's absolute path (its symlink)
	Generation     string `json:"generation"`      // base name of the generation linked from
	ManifestSHA256 string `json:"manifest_sha256"` // hex digest of that generation's manifest.json
}

// Manifest is DIR/.nsbox/manifest.json.
type Manifest struct {
	Format       int       `json:"format"` // FormatVersion
	NsboxVersion string    `json:"nsbox_version"`
	BuiltAt      time.Time `json:"built_at"`
	Python       Python    `json:"python"`
	// Lock is nil for a stdlib-only root. In a layered root, lock.txt is
	// the extra lock and Packages are the whole root's: the parent's and
	// the extra lock's.
	Lock *Lock `json:"lock"`
	// Parent is set in a layered root only.
	Parent *Parent `json:"parent,omitempty"`
	// Files lists every path under the root except MetaDir and its
	// content, sorted by Path.
	Files []File `json:"files,omitempty"`
}

// Header is DIR/.nsbox/root.json: small, read on every run.
type Header struct {
	Format         int    `json:"format"`          // FormatVersion
	ManifestSHA256 string `json:"manifest_sha256"` // hex digest of manifest.json
	Python         Python `json:"python"`          // Path and Version
	// Critical are the files a run cannot do without, and the directories
	// and symlinks leading to them, sorted by Path. Each is a copy of its
	// manifest entry without the digest: Check compares type, mode, size
	// and link target.
	Critical []File `json:"critical"`
}

// Load reads and validates DIR/.nsbox/manifest.json. It does not compare
// the manifest with the tree (see Verify) or with the header (see Check).
func Load(dir string) (*Manifest, error) {
	p := filepath.Join(dir, MetaDir, ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("rootfs: load manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("rootfs: load manifest %s: %w", p, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("rootfs: load manifest %s: %w", p, err)
	}
	return &m, nil
}

// validate checks what a reader of the manifest relies on: the format,
// an absolute interpreter path, and sorted, unique, clean file paths of a
// known type.
func (m *Manifest) validate() error {
	if m.Format != FormatVersion {
		return fmt.Errorf("format %d, this nsbox reads format %d", m.Format, FormatVersion)
	}
	if !isRootPath(m.Python.Path) {
		return fmt.Errorf("python path %q: not an absolute clean path", m.Python.Path)
	}
	for i, f := range m.Files {
		if !isRootPath(f.Path) || f.Path == "/" {
			return fmt.Errorf("file %q: not an absolute clean path below /", f.Path)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fmt.Errorf("file %s: files not sorted or listed twice", f.Path)
		}
		switch f.Type {
		case TypeFile, TypeDir, TypeSymlink:
		default:
			return fmt.Errorf("file %s: unknown type %q", f.Path, f.Type)
		}
	}
	return nil
}

// isRootPath reports whether p is an absolute, clean path.
func isRootPath(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}

// find returns the manifest entry of p.
func (m *Manifest) find(p string) (File, bool) {
	i, ok := slices.BinarySearchFunc(m.Files, p, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return File{}, false
	}
	return m.Files[i], true
}

// Write writes m as DIR/.nsbox/manifest.json and then the header
// DIR/.nsbox/root.json, whose critical files are the manifest entries of
// the paths in critical (each must be listed in m.Files). MetaDir must not
// exist yet: a root is written once, in a build directory, and never
// updated in place.
func Write(dir string, m *Manifest, critical []string) (*Header, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("rootfs: write manifest: %w", err)
	}
	h := &Header{Format: FormatVersion, Python: Python{Path: m.Python.Path, Version: m.Python.Version}}
	for _, p := range critical {
		f, ok := m.find(p)
		if !ok {
			return nil, fmt.Errorf("rootfs: write header: critical file %s is not in the manifest", p)
		}
		f.SHA256 = ""
		h.Critical = append(h.Critical, f)
	}
	slices.SortFunc(h.Critical, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	h.Critical = slices.CompactFunc(h.Critical, func(a, b File) bool { return a.Path == b.Path })

	body, err := encodeManifest(m)
	if err != nil {
		return nil, fmt.Errorf("rootfs: encode manifest: %w", err)
	}
	h.ManifestSHA256 = sha256Hex(body)
	head, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rootfs: encode header: %w", err)
	}
	meta := filepath.Join(dir, MetaDir)
	if err := os.Mkdir(meta, 0o755); err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	// The manifest goes first: a header is only ever next to the manifest
	// it hashes.
	if err := writeNew(filepath.Join(meta, ManifestFile), body); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(meta, HeaderFile), append(head, '\n')); err != nil {
		return nil, err
	}
	return h, nil
}

// encodeManifest is compact JSON with one file per line, so that two
// manifests can be compared with diff while the file read on every run
// stays small.
func encodeManifest(m *Manifest) ([]byte, error) {
	top := *m
	top.Files = nil // omitted: the files are appended below
	head, err := json.Marshal(&top)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1]) // without the closing brace
	b.WriteString(`,"files":[`)
	for i, f := range m.Files {
		line, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

// writeNew creates path (which must not exist) with mode 0644 and data.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("rootfs: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("rootfs: close %s: %w", path, err)
	}
	return nil
}
