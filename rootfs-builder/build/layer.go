package build

// Layered roots (`nsbox rootfs build --from PARENT --lock EXTRA --out
// CHILD`). The child is a complete root like any other: its manifest
// covers every file and `nsbox rootfs verify` checks it the same way. It
// is built from the parent's current generation, held for the build:
//
//   - every directory and symlink of the parent is recreated, every
//     regular file hard-linked (the parent's metadata excepted): the
//     child shares the parent's inodes, so the build never writes into an
//     existing file, it only adds new ones or renames over a name;
//   - the extra lock's wheels are installed by pip into a staging
//     directory, then moved in; a path the parent has already is a
//     conflict and refuses the build, and so does a package the parent
//     has at another version (one at the same version is skipped);
//   - the later steps (libraries, loader check, bytecode, owners and
//     modes) see the new files only;
//   - the manifest reuses the parent manifest's digest of each linked
//     file (same inode, same content) and hashes only the new files. A
//     parent file changed after the parent was built thus makes the
//     child's verify fail too.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// parentRoot is a layered root's parent, held for the build.
type parentRoot struct {
	path     string // the parent root's absolute path
	name     string // its built-in name, or ""
	held     *rootfs.Held
	m        *rootfs.Manifest
	manifest string // hex sha256 of its manifest.json
}

// linkedFile is a file of the child hard-linked from the parent.
type linkedFile struct {
	dev, ino uint64
	sha256   string // the parent manifest's digest
}

// label names the parent in messages: its built-in name, or its path.
func (p *parentRoot) label() string {
	if p.name != "" {
		return p.name
	}
	return p.path
}

// openParent holds the current generation of o.From and checks it cheaply
// against its manifest (the header, the manifest's digest and the
// critical files, as before a run; every other file is lstat'ed against
// its entry when it is linked). A full re-hash is not needed: the child's
// manifest takes the parent's digests, so a parent file changed since its
// build fails the child's verify. It sets o.Python to the parent's
// interpreter, or refuses another one.
func openParent(o *Options) (*parentRoot, error) {
	if o.Lock == "" {
		return nil, errors.New("--from needs --lock: a layered root is its parent plus the packages of a lock")
	}
	from, err := filepath.Abs(o.From)
	if err != nil {
		return nil, fmt.Errorf("parent root %s: %w", o.From, err)
	}
	p := &parentRoot{path: from, name: o.FromName}
	if p.held, err = rootfs.Hold(from); err != nil {
		return nil, fmt.Errorf("parent root %s: %w", p.label(), err)
	}
	ok := false
	defer func() {
		if !ok {
			p.held.Close()
		}
	}()
	h, err := rootfs.Check(p.held.Dir)
	if err != nil {
		return nil, fmt.Errorf("parent root %s: %w (rebuild it, or run `nsbox rootfs verify %s`)", p.label(), err, from)
	}
	if p.m, err = rootfs.Load(p.held.Dir); err != nil {
		return nil, fmt.Errorf("parent root %s: %w", p.label(), err)
	}
	if p.m.Python.Host == "" {
		return nil, fmt.Errorf("parent root %s: its manifest names no host interpreter", p.label())
	}
	p.manifest = h.ManifestSHA256
	switch {
	case o.Python == "":
		o.Python = p.m.Python.Host
	case filepath.Clean(o.Python) != p.m.Python.Host:
		return nil, fmt.Errorf("--python %s: the parent %s was built with %s, and a layered root runs its parent's interpreter (leave --python out)",
			o.Python, p.label(), p.m.Python.Host)
	}
	ok = true
	return p, nil
}

// checkOut refuses an output that is the parent itself, or on another
// file system than the parent (hard links cannot cross one).
func (p *parentRoot) checkOut(out string) error {
	if out == p.path {
		return fmt.Errorf("--out %s is the parent root itself", out)
	}
	if gen, err := rootfs.Resolve(out); err == nil && gen == p.held.Dir {
		return fmt.Errorf("--out %s names the parent's generation %s", out, gen)
	}
	var a, b syscall.Stat_t
	if err := syscall.Stat(p.held.Dir, &a); err != nil {
		return fmt.Errorf("parent root %s: %w", p.held.Dir, err)
	}
	if err := syscall.Stat(filepath.Dir(out), &b); err != nil {
		return fmt.Errorf("output directory %s: %w", filepath.Dir(out), err)
	}
	if a.Dev != b.Dev {
		return fmt.Errorf("--out %s is on another file system than the parent %s (%s): a layered root hard-links its parent's files, so it must be built beside it (e.g. in the same roots directory)",
			out, p.label(), p.held.Dir)
	}
	return nil
}

// record is the manifest's account of the parent.
func (p *parentRoot) record() *rootfs.Parent {
	return &rootfs.Parent{Name: p.name, Path: p.path, Generation: filepath.Base(p.held.Dir), ManifestSHA256: p.manifest}
}

// pins returns the parent's packages by normalised name: name, version.
func (p *parentRoot) pins() map[string][2]string {
	out := map[string][2]string{}
	if p.m.Lock == nil {
		return out
	}
	for _, pin := range p.m.Lock.Packages {
		name, version, _ := strings.Cut(pin, "==")
		out[normalize(name)] = [2]string{name, version}
	}
	return out
}

// packages are the whole root's pins: the parent's and those of extra,
// sorted by normalised name, each once.
func (p *parentRoot) packages(extra []Requirement) []string {
	all := p.pins()
	for _, r := range extra {
		if _, ok := all[normalize(r.Name)]; !ok {
			all[normalize(r.Name)] = [2]string{r.Name, r.Version}
		}
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, all[k][0]+"=="+all[k][1])
	}
	return out
}

// requirements are the parent's packages as requirements (no hashes: for
// comparing with what site-packages holds).
func (p *parentRoot) requirements() []Requirement {
	var out []Requirement
	for _, nv := range p.pins() {
		out = append(out, Requirement{Name: nv[0], Version: nv[1]})
	}
	return out
}

// layerSteps are the steps of a layered build (see the top of this file).
func (b *builder) layerSteps() []step {
	return []step{
		{"inspect interpreter", b.inspectLayer, false},
		{"link parent " + b.parent.label(), b.linkParent, false},
		{"install packages", b.installLayer, false},
		{"copy shared libraries", b.copyLayerLibraries, false},
		{"check shared libraries", b.checkLayerLoadable, false},
		{"compile bytecode", b.compileLayer, false},
		{"compile runner", b.layerRunner, false},
		{"build matplotlib font cache", b.layerMatplotlibCache, false},
		{"normalize owners and modes", b.normalizeLayer, false},
	}
}

// layerMatplotlibCache builds matplotlib's font cache (mplcache.go) when
// this build installed matplotlib; a parent's matplotlib came with its
// cache, linked with the rest.
func (b *builder) layerMatplotlibCache() error {
	if _, linked := b.linked[b.sitePackages()+"/matplotlib/__init__.py"]; linked {
		return nil
	}
	return b.matplotlibCache()
}

// inspectLayer inspects the interpreter and refuses one whose version is
// not the parent's: the host's interpreter was upgraded since, and the
// child's bytecode and extension modules would not match the parent's.
func (b *builder) inspectLayer() error {
	if err := b.inspect(); err != nil {
		return err
	}
	if b.py.Version != b.parent.m.Python.Version {
		return fmt.Errorf("interpreter %s is now Python %s, the parent %s was built with %s: rebuild the parent first",
			b.o.Python, b.py.Version, b.parent.label(), b.parent.m.Python.Version)
	}
	return nil
}

// linkParent recreates the parent generation's tree in the build
// directory from its manifest: directories and symlinks anew, regular
// files hard-linked after an lstat against their entry (type, size,
// mode, owned by root). A file missing or different refuses the build.
func (b *builder) linkParent() error {
	src := b.parent.held.Dir
	b.linked = make(map[string]linkedFile, len(b.parent.m.Files))
	mismatch := func(p, what string) error {
		return fmt.Errorf("parent root %s (%s) does not match its manifest: %s: %s; run `nsbox rootfs verify %s` or rebuild it",
			b.parent.label(), src, p, what, b.parent.path)
	}
	dirs := map[string]bool{"/": true}
	for _, f := range b.parent.m.Files {
		// Every entry lies in a directory the manifest listed before it
		// (it is sorted): never below a symlink, so no link or mkdir is
		// made outside the build directory.
		if !dirs[path.Dir(f.Path)] {
			return mismatch(f.Path, "its directory is not a directory of the manifest")
		}
		dst := b.inRoot(f.Path)
		switch f.Type {
		case rootfs.TypeDir:
			dirs[f.Path] = true
			if err := os.Mkdir(dst, 0o755); err != nil {
				return fmt.Errorf("link parent: %w", err)
			}
		case rootfs.TypeSymlink:
			if err := os.Symlink(f.Target, dst); err != nil {
				return fmt.Errorf("link parent: %w", err)
			}
		case rootfs.TypeFile:
			if f.Mode != 0o644 && f.Mode != 0o755 {
				return mismatch(f.Path, fmt.Sprintf("its manifest mode %04o is not a built root's", f.Mode))
			}
			from := filepath.Join(src, f.Path)
			var st syscall.Stat_t
			if err := syscall.Lstat(from, &st); err != nil {
				return mismatch(f.Path, err.Error())
			}
			switch {
			case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
				return mismatch(f.Path, "not a regular file")
			case st.Size != f.Size:
				return mismatch(f.Path, fmt.Sprintf("size %d, the manifest says %d", st.Size, f.Size))
			case st.Mode&0o7777 != f.Mode:
				return mismatch(f.Path, fmt.Sprintf("mode %04o, the manifest says %04o", st.Mode&0o7777, f.Mode))
			case st.Uid != 0 || st.Gid != 0:
				return mismatch(f.Path, fmt.Sprintf("owned by %d:%d, not root", st.Uid, st.Gid))
			}
			if err := os.Link(from, dst); errors.Is(err, syscall.EXDEV) {
				return fmt.Errorf("link parent: %s and the build directory %s are on different file systems: build the layered root beside its parent", src, b.root)
			} else if err != nil {
				return fmt.Errorf("link parent: %w", err)
			}
			b.linked[f.Path] = linkedFile{dev: st.Dev, ino: st.Ino, sha256: f.SHA256}
		}
	}
	return nil
}

// isLinked reports whether the path p inside the root, of lstat fi, is
// still the parent's file linked there.
func (b *builder) isLinked(p string, fi fs.FileInfo) (linkedFile, bool) {
	l, ok := b.linked[p]
	if !ok {
		return l, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return l, ok && st.Dev == l.dev && st.Ino == l.ino
}

// knownDigest is the manifest's rootfs.Known: a linked file's digest is
// its parent manifest entry's.
func (b *builder) knownDigest(p string, fi fs.FileInfo) (string, bool) {
	l, ok := b.isLinked(p, fi)
	if !ok {
		return "", false
	}
	return l.sha256, true
}

// newFiles returns the host paths of the regular files of the root that
// are not linked from the parent: what this build added.
func (b *builder) newFiles() ([]string, error) {
	var out []string
	err := filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("find new files: %w", err)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("find new files: %w", err)
		}
		if _, ok := b.isLinked(b.inside(p), fi); !ok {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// inside returns the path inside the root of the host path p in it.
func (b *builder) inside(p string) string {
	return "/" + strings.TrimPrefix(strings.TrimPrefix(p, b.root), "/")
}
