package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// pyInfo is what the interpreter reports about itself.
type pyInfo struct {
	Impl     string `json:"impl"`      // "cpython"
	Version  string `json:"version"`   // "3.11.2"
	Short    string `json:"short"`     // "3.11"
	Stdlib   string `json:"stdlib"`    // directory of os.py, e.g. /usr/lib/python3.11
	Dynload  string `json:"dynload"`   // the lib-dynload directory on sys.path, or ""
	CacheTag string `json:"cache_tag"` // "cpython-311", names the .pyc files
}

// inspectScript prints pyInfo. It runs with -I -S: no environment, no
// site, so it sees the interpreter's own paths only.
const inspectScript = `import json, os, sys
print(json.dumps({
    "impl": sys.implementation.name,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "short": "%d.%d" % sys.version_info[:2],
    "stdlib": os.path.dirname(os.__file__),
    "dynload": next((p for p in sys.path if os.path.basename(p) == "lib-dynload"), ""),
    "cache_tag": sys.implementation.cache_tag or "",
}))`

// inspect asks the interpreter for its version and directories.
func (b *builder) inspect() error {
	cmd := b.command(b.o.Python, "-I", "-S", "-c", inspectScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("inspect interpreter %s: %w: %s", b.o.Python, err, strings.TrimSpace(stderr.String()))
	}
	var p pyInfo
	if err := json.Unmarshal(out, &p); err != nil {
		return fmt.Errorf("inspect interpreter %s: %w (output %q)", b.o.Python, err, out)
	}
	switch {
	case p.Impl != "cpython":
		return fmt.Errorf("interpreter %s is %s, only CPython is supported", b.o.Python, p.Impl)
	case p.CacheTag == "":
		return fmt.Errorf("interpreter %s has no bytecode cache tag", b.o.Python)
	case !filepath.IsAbs(p.Stdlib) || p.Dynload != "" && !filepath.IsAbs(p.Dynload):
		return fmt.Errorf("interpreter %s: stdlib %q, lib-dynload %q: not absolute paths", b.o.Python, p.Stdlib, p.Dynload)
	}
	b.py = p
	return nil
}

// sitePackages is the venv's site-packages directory inside the root.
func (b *builder) sitePackages() string {
	return "/venv/lib/python" + b.py.Short + "/site-packages"
}

// pycPath is the path of the .pyc the interpreter uses for the source
// file py (PEP 3147).
func (b *builder) pycPath(py string) string {
	dir, base := filepath.Split(py)
	return filepath.Join(dir, "__pycache__", strings.TrimSuffix(base, ".py")+"."+b.py.CacheTag+".pyc")
}
