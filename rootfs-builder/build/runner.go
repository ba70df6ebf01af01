package build

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// compileRunner writes nsbox's Python runner, compiled by the root's own
// interpreter, to pyrunner.CompiledPath() in the root: the only form the
// runner starts from. Its source never enters the root. The file is part
// of the manifest like any other.
func (b *builder) compileRunner() error {
	dst := b.inRoot(pyrunner.CompiledPath())
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("runner: mkdir %s: %w", filepath.Dir(dst), err)
	}
	return pyrunner.Compile(b.ctx, b.o.Python, dst) // its errors name the step and the file
}
