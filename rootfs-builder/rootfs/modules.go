package rootfs

import (
	"path"
	"slices"
	"strings"
)

// SitePackages is the venv's site-packages directory inside a root whose
// interpreter has version v ("3.11.2"): /venv/lib/python3.11/site-packages.
func SitePackages(v string) string {
	short := v
	if major, rest, ok := strings.Cut(v, "."); ok {
		minor, _, _ := strings.Cut(rest, ".")
		short = major + "." + minor
	}
	return "/venv/lib/python" + short + "/site-packages"
}

// Modules returns the top-level import names the root's packages install,
// read from the manifest's entries directly in site-packages, sorted: a
// directory ("numpy", "mpl_toolkits") or a module file ("six.py",
// "kiwisolver.cpython-311-x86_64-linux-gnu.so", "_cffi_backend.abi3.so").
// Metadata (*.dist-info, *.data), bundled libraries (numpy.libs),
// __pycache__, .pth files and names that are not identifiers (type stubs:
// wrapt-stubs) are not modules. The standard library's
// modules are not listed: they are not in site-packages.
func (m *Manifest) Modules() []string {
	dir := SitePackages(m.Python.Version) + "/"
	var out []string
	for _, f := range m.Files {
		rest, ok := strings.CutPrefix(f.Path, dir)
		if !ok || rest == "" || strings.Contains(rest, "/") {
			continue
		}
		if name := moduleName(rest, f.Type); isIdentifier(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// isIdentifier reports whether name can be imported: an ASCII Python
// identifier ("wrapt-stubs", type stubs, cannot).
func isIdentifier(name string) bool {
	for i, c := range name {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return name != ""
}

// moduleName is the import name of site-packages entry base, or "".
func moduleName(base, typ string) string {
	if base == "__pycache__" {
		return ""
	}
	if typ == TypeDir {
		if strings.Contains(base, ".") { // numpy.libs, x.dist-info, x.data
			return ""
		}
		return base
	}
	if typ != TypeFile {
		return ""
	}
	switch ext := path.Ext(base); ext {
	case ".py":
		return strings.TrimSuffix(base, ext)
	case ".so":
		// name.so, name.abi3.so, name.cpython-311-x86_64-linux-gnu.so
		name, _, _ := strings.Cut(base, ".")
		return name
	}
	return ""
}
