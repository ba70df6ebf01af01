package build

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/rootfs-builder/elfdeps"
)

// venvClosure returns the ELF closure of the venv's ELF files (elfdeps).
//
// A wheel's vendored libraries (auditwheel's <dist>.libs directory beside
// the packages: numpy.libs, scipy.libs) are loaded by its extension
// modules, found through the modules' DT_RPATH, and a vendored library
// without an RPATH of its own finds its own dependencies through the RPATH
// it inherits from the module that loaded it (scipy's libgfortran finds
// the libquadmath beside it that way). Taken alone, such a library's
// dependencies resolve nowhere, so the vendored libraries are resolved
// from the modules that load them; only one that no module loads (a
// library a package opens itself, by path) is an input of its own.
func venvClosure(elfs []string) ([]string, error) {
	var modules, vendored []string
	for _, p := range elfs {
		if isVendored(p) {
			vendored = append(vendored, p)
		} else {
			modules = append(modules, p)
		}
	}
	libs, err := elfdeps.Closure(modules)
	if err != nil {
		return nil, err
	}
	reached := map[string]bool{}
	for _, l := range libs {
		reached[filepath.Clean(l)] = true
	}
	var alone []string
	for _, v := range vendored {
		if !reached[filepath.Clean(v)] {
			alone = append(alone, v)
		}
	}
	if len(alone) == 0 {
		return libs, nil
	}
	more, err := elfdeps.Closure(alone)
	if err != nil {
		return nil, fmt.Errorf("vendored libraries no extension module loads: %w", err)
	}
	return append(libs, more...), nil
}

// isVendored reports whether p is in a wheel's directory of vendored
// libraries (<dist>.libs).
func isVendored(p string) bool {
	return strings.HasSuffix(filepath.Base(filepath.Dir(p)), ".libs")
}
