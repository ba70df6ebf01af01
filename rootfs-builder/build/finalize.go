package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// binDirs are where a shell or coreutils would be found. In the root they
// hold the interpreter and links to it, nothing else.
var binDirs = []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

// normalize gives every path of the root its final owner and mode: owned
// by root; directories 0755; files 0644, or 0755 for an ELF object that
// was executable (the interpreter, the loader, some libraries), so that
// the only executable files are ELF objects: no script can be run through
// its #! line. setuid, setgid and sticky bits go. A device, fifo or socket
// is refused, and so is any program in a bin directory but the
// interpreter.
func (b *builder) normalize() error {
	_, interp, err := resolveInRoot(b.root, b.o.Python)
	if err != nil {
		return fmt.Errorf("normalize: interpreter %s in the root: %w", b.o.Python, err)
	}
	return filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("normalize: %w", err)
		}
		return b.normalizeOne(p, d, interp)
	})
}

// normalizeOne gives the path p of the root, of entry d, its final owner
// and mode (see normalize).
func (b *builder) normalizeOne(p string, d fs.DirEntry, interp string) error {
	inside := "/" + strings.TrimPrefix(strings.TrimPrefix(p, b.root), "/")
	fi, err := d.Info()
	if err != nil {
		return fmt.Errorf("normalize: %w", err)
	}
	switch {
	case fi.IsDir():
		err = os.Chmod(p, 0o755)
	case fi.Mode().IsRegular():
		mode := fs.FileMode(0o644)
		elf, eerr := isELF(p)
		if eerr != nil {
			return fmt.Errorf("normalize: %w", eerr)
		}
		if elf && fi.Mode()&0o111 != 0 {
			mode = 0o755
		}
		err = os.Chmod(p, mode)
	case fi.Mode()&fs.ModeSymlink != 0:
	default:
		return fmt.Errorf("normalize: %s: not a file, directory or symlink (%v)", inside, fi.Mode().Type())
	}
	if err != nil {
		return fmt.Errorf("normalize: %w", err)
	}
	if slices.Contains(binDirs, path.Dir(inside)) {
		if err := b.checkBinEntry(inside, interp); err != nil {
			return err
		}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != 0 || st.Gid != 0) {
		if err := os.Lchown(p, 0, 0); err != nil {
			return fmt.Errorf("normalize: make the root's files owned by root: %w", err)
		}
	}
	return nil
}

// checkBinEntry refuses an entry of a bin directory that is not the
// interpreter or a symlink resolving to it. Only the interpreter's own
// chain is copied there, so anything else is a bug.
func (b *builder) checkBinEntry(p, interp string) error {
	_, real, err := resolveInRoot(b.root, p)
	if err != nil || real != interp {
		return fmt.Errorf("bug: %s in the root is not the interpreter %s", p, interp)
	}
	return nil
}

// writeManifest hashes the root, writes .nsbox/ and returns the manifest.
func (b *builder) writeManifest() (*rootfs.Manifest, error) {
	// A layered root's hard-linked files are its parent's: their digests
	// are the parent manifest's (layer.go), the new files are hashed.
	files, err := rootfs.ScanKnown(b.root, b.knownDigest)
	if err != nil {
		return nil, err
	}
	m := &rootfs.Manifest{
		Format:       rootfs.FormatVersion,
		NsboxVersion: b.o.Version,
		BuiltAt:      time.Now().UTC().Truncate(time.Second),
		Python:       rootfs.Python{Path: "/venv/bin/python", Version: b.py.Version, Host: b.o.Python},
		Files:        files,
	}
	if b.reqs != nil {
		sum := sha256.Sum256(b.lockData)
		m.Lock = &rootfs.Lock{SHA256: hex.EncodeToString(sum[:]), Packages: []string{}}
		for _, r := range b.reqs {
			m.Lock.Packages = append(m.Lock.Packages, r.String())
		}
	}
	if b.parent != nil {
		m.Parent = b.parent.record()
		m.Lock.Packages = b.parent.packages(b.reqs)
	}
	critical, err := b.criticalPaths()
	if err != nil {
		return nil, err
	}
	if _, err := rootfs.Write(b.root, m, critical); err != nil {
		return nil, err
	}
	// Whatever the umask, the metadata is readable like the rest.
	meta := b.inRoot("/" + rootfs.MetaDir)
	if err := os.Chmod(meta, 0o755); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	written := []string{rootfs.ManifestFile, rootfs.HeaderFile}
	if b.reqs != nil {
		if err := os.WriteFile(filepath.Join(meta, rootfs.LockFile), b.lockData, 0o644); err != nil {
			return nil, fmt.Errorf("write manifest: %w", err)
		}
		written = append(written, rootfs.LockFile)
	}
	for _, name := range written {
		if err := os.Chmod(filepath.Join(meta, name), 0o644); err != nil {
			return nil, fmt.Errorf("write manifest: %w", err)
		}
	}
	return m, nil
}

// criticalPaths are the files a run cannot do without, and every
// directory and symlink on the way to them inside the root: the venv's
// python and pyvenv.cfg, the interpreter, the dynamic loader, libc,
// libpython if the interpreter links it, and os, site and encodings with
// their pycs (with unchecked-hash pycs, the pyc is what runs).
func (b *builder) criticalPaths() ([]string, error) {
	loader, libs, err := b.interpreterLibs()
	if err != nil {
		return nil, err
	}
	cands := []string{"/venv/bin/python", "/venv/pyvenv.cfg", b.o.Python}
	if loader != "" {
		cands = append(cands, loader)
	}
	for _, l := range libs {
		if base := path.Base(l); strings.HasPrefix(base, "libc.so") || strings.HasPrefix(base, "libpython") {
			cands = append(cands, l)
		}
	}
	for _, mod := range []string{"os.py", "site.py", "encodings/__init__.py"} {
		py := path.Join(b.py.Stdlib, mod)
		cands = append(cands, py, b.pycPath(py))
	}
	var out []string
	for _, c := range cands {
		visited, _, err := resolveInRoot(b.root, c)
		if err != nil {
			return nil, fmt.Errorf("critical file %s in the root: %w", c, err)
		}
		out = append(out, visited...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// resolveInRoot resolves the absolute path p inside root as the kernel
// would with root as "/", one component at a time, symlinks followed
// (absolute targets from root). It returns every path met (the
// directories on the way, each symlink, the final path) and the final,
// symlink-free path, all inside the root.
func resolveInRoot(root, p string) ([]string, string, error) {
	const maxLinks = 40 // the kernel's MAXSYMLINKS
	var visited []string
	cur, rest, links := "/", p, 0
	for {
		rest = strings.TrimLeft(rest, "/")
		if rest == "" {
			return visited, cur, nil
		}
		c, after, _ := strings.Cut(rest, "/")
		rest = after
		switch c {
		case ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return nil, "", fmt.Errorf("resolve %s: %s: %w", p, next, err)
		}
		visited = append(visited, next)
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return nil, "", fmt.Errorf("resolve %s: %w", p, syscall.ELOOP)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return nil, "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		rest = target + "/" + rest
	}
}
