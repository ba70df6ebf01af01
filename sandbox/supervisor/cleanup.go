package supervisor

import (
	"errors"
	"os"
)

// cleanup is a run's undo stack: each step that leaves something on the
// host pushes how to remove it, and run unwinds them last-in first-out,
// so that what was created last (the init's descriptors) goes before
// what it depends on (the cgroup, the run directory). Ownership never
// passes by setting a variable to nil.
type cleanup []func() error

// push adds undo to the stack.
func (c *cleanup) push(undo func() error) { *c = append(*c, undo) }

// pushClose adds closing files to the stack. Closing is never an error
// here: a descriptor handed to the init is closed on this side as soon
// as the init has its copy, and may be closed again.
func (c *cleanup) pushClose(files ...*os.File) {
	c.push(func() error {
		closeAll(files...)
		return nil
	})
}

// run undoes everything, newest first, and returns every error joined.
// It empties the stack: a second run does nothing.
func (c *cleanup) run() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		if err := (*c)[i](); err != nil {
			errs = append(errs, err)
		}
	}
	*c = nil
	return errors.Join(errs...)
}

// closeAll closes files, ignoring errors (already closed, or a pipe end
// whose reader is gone).
func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
