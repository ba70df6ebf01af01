package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// mplCacheScript imports matplotlib's font manager, which builds the font
// cache in $MPLCONFIGDIR when there is none there, and prints what the
// check of the result needs: the cache directory matplotlib used, its
// data directory (relative font paths in the cache are relative to it),
// and the cache's version (the file is fontlist-vVERSION.json).
const mplCacheScript = "import sys, matplotlib, matplotlib.font_manager as fm\n" +
	"sys.stdout.write('%s\\n%s\\n%s\\n' % (matplotlib.get_cachedir(), matplotlib.get_data_path(), fm.FontManager.__version__))\n"

// nobody is the uid and gid the font cache is built as.
const nobody = 65534

// fontlistRe matches the name of matplotlib's font cache file.
var fontlistRe = regexp.MustCompile(`^fontlist-v[0-9A-Za-z.]+\.json$`)

// matplotlibCache builds matplotlib's font cache into the root, at
// pyrunner.MatplotlibCacheDir, when the root has matplotlib (else it does
// nothing). Without it every run that imports matplotlib builds the cache
// itself: slow, and its fontconfig probe starts fc-list, a subprocess the
// runner's audit hook refuses and reports. The runner copies the file
// into the program's $MPLCONFIGDIR (pyrunner.MatplotlibCacheDir).
//
// The root's own interpreter builds it, chrooted into the root and with
// the environment a program gets (spec.BaseEnv), so that it finds exactly
// the fonts a program would: every path in the cache is a path inside the
// root (matplotlib's own fonts relative to its data directory), never one
// of the build directory or of the host. The check below proves it. After
// the bytecode: the import uses the root's pycs, and -B writes none.
//
// This is the one step that runs a package's code (matplotlib's, and
// what it imports), so it runs with no more than it needs: as nobody
// (65534), with no capability to leave the chroot, in new PID and network
// namespaces (its processes die with it; no network), able to write only
// its own fresh directory. The file it leaves there must be a regular
// file, and is then renamed into place by the builder: a file already
// there (a hard link shared with another root) is replaced, never written
// through.
func (b *builder) matplotlibCache() error {
	pkg := b.inRoot(b.sitePackages() + "/matplotlib/__init__.py")
	if _, err := os.Stat(pkg); errors.Is(err, fs.ErrNotExist) {
		return nil // no matplotlib in this root
	} else if err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	// The build directory is created 0700; nobody must reach the root's
	// files through it. 0755 is the mode normalize gives it anyway.
	if err := os.Chmod(b.root, 0o755); err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	dst := b.inRoot(pyrunner.MatplotlibCacheDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	work, err := os.MkdirTemp(dst, ".build-")
	if err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	defer os.RemoveAll(work)
	if err := os.Chown(work, nobody, nobody); err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	workInRoot := pyrunner.MatplotlibCacheDir + "/" + filepath.Base(work)

	// -s -P -B rather than -I, which would ignore PYTHONHASHSEED: the
	// environment is set whole here. A fixed seed makes the cache's order
	// of fonts (from a set) the same at every build.
	cmd := b.command("/venv/bin/python", "-s", "-P", "-B", "-c", mplCacheScript)
	cmd.SysProcAttr.Chroot = b.root
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	cmd.Dir = "/"
	cmd.Env = append(slices.Clone(spec.BaseEnv), "MPLCONFIGDIR="+workInRoot, "PYTHONHASHSEED=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("matplotlib font cache: /venv/bin/python chrooted into the root: %w\n%s", err, lastLines(stderr.Bytes(), 20))
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 3 {
		return fmt.Errorf("matplotlib font cache: unexpected output %q\n%s", stdout.String(), lastLines(stderr.Bytes(), 20))
	}
	cacheDir, dataDir, version := lines[0], lines[1], lines[2]
	if cacheDir != workInRoot {
		return fmt.Errorf("matplotlib font cache: matplotlib used %s, not MPLCONFIGDIR %s\n%s", cacheDir, workInRoot, lastLines(stderr.Bytes(), 20))
	}
	if want := b.sitePackages() + "/matplotlib/mpl-data"; dataDir != want {
		return fmt.Errorf("matplotlib font cache: matplotlib's data directory is %s, want %s", dataDir, want)
	}
	name := "fontlist-v" + version + ".json"
	if !fontlistRe.MatchString(name) {
		return fmt.Errorf("matplotlib font cache: unexpected font manager version %q", version)
	}
	entries, err := os.ReadDir(work)
	if err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != name || !entries[0].Type().IsRegular() {
		return fmt.Errorf("matplotlib font cache: %s holds %v, want only the regular file %s", workInRoot, names, name)
	}
	data, err := os.ReadFile(filepath.Join(work, name))
	if err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	if err := checkFontCache(data, version, dataDir, b.inRoot); err != nil {
		return fmt.Errorf("matplotlib font cache %s: %w", workInRoot+"/"+name, err)
	}
	if err := os.Rename(filepath.Join(work, name), filepath.Join(dst, name)); err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	// Only the current cache is kept (a root built from another may hold
	// the file of another matplotlib); the runner copies every file here.
	old, err := os.ReadDir(dst)
	if err != nil {
		return fmt.Errorf("matplotlib font cache: %w", err)
	}
	for _, e := range old {
		if e.Name() != name && e.Name() != filepath.Base(work) {
			if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
				return fmt.Errorf("matplotlib font cache: remove stale entry: %w", err)
			}
		}
	}
	return nil
}

// fontCache is the part of matplotlib's fontlist JSON that the check reads.
type fontCache struct {
	Version string      `json:"_version"`
	TTF     []fontEntry `json:"ttflist"`
	AFM     []fontEntry `json:"afmlist"`
}

type fontEntry struct {
	Fname string `json:"fname"`
}

// checkFontCache checks matplotlib's font cache data: its version is
// version, it lists at least one TrueType font, and every font path is a
// font file inside the root, either relative to dataDir (matplotlib's own
// fonts, as matplotlib writes them) or absolute, clean and without "..".
// inRoot maps a path inside the root to the host's.
func checkFontCache(data []byte, version, dataDir string, inRoot func(string) string) error {
	var c fontCache
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("not matplotlib's font cache: %w", err)
	}
	if c.Version != version {
		return fmt.Errorf("version %q, want %q", c.Version, version)
	}
	if len(c.TTF) == 0 {
		return errors.New("no TrueType font listed (matplotlib ships DejaVu)")
	}
	for _, f := range append(c.TTF, c.AFM...) {
		p := f.Fname
		if !path.IsAbs(p) {
			p = dataDir + "/" + p
		}
		if path.Clean(p) != p {
			return fmt.Errorf("font path %q: not a clean path inside the root", f.Fname)
		}
		fi, err := os.Lstat(inRoot(p))
		if err != nil {
			return fmt.Errorf("font path %q: not in the root: %w", f.Fname, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("font path %q: %s in the root is not a regular file", f.Fname, p)
		}
	}
	return nil
}
