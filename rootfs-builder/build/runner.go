package build

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// compileRunner writes nsbox's Python runner, compiled by the root's own
// interpreter, to pyrunner.CompiledPath() in the root. Passed with -c the
// runner would be compiled from source on every run; as an unchecked-hash
// .pyc it is loaded. The file is part of the manifest like any other.
func (b *builder) compileRunner() error {
	dst := b.inRoot(pyrunner.CompiledPath())
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("runner: mkdir %s: %w", filepath.Dir(dst), err)
	}
	// The source goes next to the root, not into it: only the .pyc ships.
	src := b.root + ".runner.py"
	if err := os.WriteFile(src, []byte(pyrunner.Source), 0o600); err != nil {
		return fmt.Errorf("runner: write %s: %w", src, err)
	}
	defer os.Remove(src)
	const script = "import py_compile, sys\n" +
		"py_compile.compile(sys.argv[1], cfile=sys.argv[2], dfile=sys.argv[3], doraise=True,\n" +
		"    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
	shown := filepath.Join(filepath.Dir(pyrunner.CompiledPath()), "runner.py")
	cmd := exec.CommandContext(b.ctx, b.o.Python, "-I", "-c", script, src, dst, shown)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("runner: compile with %s: %w\n%s", b.o.Python, err, out)
	}
	return nil
}
