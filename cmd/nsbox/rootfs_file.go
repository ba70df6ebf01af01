package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/nsbox/nsbox/sandbox/roots"
)

// rootFile is a layered root declared in a small TOML file (`nsbox
// rootfs build --root-file FILE`):
//
//	from = "datasci"      # a built-in root's name, or a root's path
//	lock = "extra.lock"   # the extra packages' lock
//
// Relative paths are relative to the file's directory.
type rootFile struct {
	From string `toml:"from"`
	Lock string `toml:"lock"`
}

// readRootFile reads and checks a root file, and returns the parent's
// path, its built-in name ("" for a path) and the lock's path.
func readRootFile(path string) (from, fromName, lock string, err error) {
	var f rootFile
	meta, err := toml.DecodeFile(path, &f)
	if err != nil {
		return "", "", "", fmt.Errorf("root file %s: %w", path, err)
	}
	if extra := meta.Undecoded(); len(extra) > 0 {
		keys := make([]string, len(extra))
		for i, k := range extra {
			keys[i] = k.String()
		}
		return "", "", "", fmt.Errorf("root file %s: unknown key %s (a root file has from and lock)", path, strings.Join(keys, ", "))
	}
	switch {
	case f.From == "":
		return "", "", "", fmt.Errorf("root file %s: no from: name the parent root (a built-in name or a path)", path)
	case f.Lock == "":
		return "", "", "", fmt.Errorf("root file %s: no lock: name the extra packages' lock", path)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if roots.IsBuiltin(f.From) {
		return roots.Path(f.From), f.From, rel(f.Lock), nil
	}
	return rel(f.From), "", rel(f.Lock), nil
}

// errRootFileAndFlags refuses --root-file with --from or --lock.
var errRootFileAndFlags = errors.New("--root-file gives the parent and the lock: leave out --from and --lock")
