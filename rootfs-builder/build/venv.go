package build

import (
	"fmt"
	"os"
	"path/filepath"
)

// venvBin are the entries of /venv/bin: the interpreter under the names a
// venv gives it. Nothing else is kept there.
func (b *builder) venvBin() []string {
	return []string{"python", "python3", "python" + b.py.Short}
}

// createVenv writes the venv skeleton that `python -m venv --without-pip`
// would, minus the activate scripts (there is no shell to source them) and
// the "command" line of pyvenv.cfg (it would record the build directory):
//
//	/venv/pyvenv.cfg        home = the interpreter's directory inside the root
//	/venv/bin/python        -> the interpreter (absolute: it resolves inside
//	                           the root, and to the same file on the host)
//	/venv/bin/python3, python3.X -> python
//	/venv/lib/python3.X/site-packages/
//
// The interpreter finds pyvenv.cfg next to the directory of the path it
// was started as, so /venv/bin/python gets the venv's site-packages and
// not the base interpreter's (include-system-site-packages = false).
func (b *builder) createVenv() error {
	if err := os.MkdirAll(b.inRoot(b.sitePackages()), 0o755); err != nil {
		return fmt.Errorf("create venv: %w", err)
	}
	if err := os.MkdirAll(b.inRoot("/venv/bin"), 0o755); err != nil {
		return fmt.Errorf("create venv: %w", err)
	}
	cfg := fmt.Sprintf("home = %s\ninclude-system-site-packages = false\nversion = %s\nexecutable = %s\n",
		filepath.Dir(b.o.Python), b.py.Version, b.o.Python)
	if err := os.WriteFile(b.inRoot("/venv/pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("create venv: %w", err)
	}
	for i, name := range b.venvBin() {
		target := b.o.Python
		if i > 0 {
			target = "python"
		}
		if err := os.Symlink(target, b.inRoot("/venv/bin/"+name)); err != nil {
			return fmt.Errorf("create venv: %w", err)
		}
	}
	return nil
}
