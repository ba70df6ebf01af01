package build

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
)

// compileRunner writes nsbox's Python runner, compiled by the root's own
// interpreter, to pyrunner.CompiledPath() in the root: the only form the
// runner starts from. Its source never enters the root. Then the runner's
// own library (RestrictedPython, hash-checked against its lock) into
// pyrunner.LibDir(), compiled too, unless a parent root already gave this
// layer the same one (the directory's name carries the wheel's digest).
// The files are part of the manifest like any other.
func (b *builder) compileRunner() error {
	dst := b.inRoot(pyrunner.CompiledPath())
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("runner: mkdir %s: %w", filepath.Dir(dst), err)
	}
	if err := pyrunner.Compile(b.ctx, b.o.Python, dst); err != nil {
		return err // its errors name the step and the file
	}
	lib := b.inRoot(pyrunner.LibDir())
	if _, err := os.Lstat(lib); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("runner: stat %s: %w", lib, err)
	}
	return pyrunner.InstallLib(b.ctx, b.o.Python, lib)
}
