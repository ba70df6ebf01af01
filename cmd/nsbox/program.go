package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/internal/filekind"
	"github.com/nsbox/nsbox/sandbox/job"
)

// programLimits bound reading the program: at most size bytes, and from
// standard input within wait (the run's own wall clock: a caller whose
// stdin never closes must not hold nsbox forever).
type programLimits struct {
	size int64
	wait time.Duration
	// input: what is read is the program's standard input (--stdin),
	// bounded by job.MaxStdin, not the program.
	input bool
}

// what names what is read, in errors.
func (lim programLimits) what() string {
	if lim.input {
		return "--stdin"
	}
	return "program"
}

// readCode returns the program from -c, FILE or stdin ("-"); exactly one.
// It never reads more than the limit (a bigger program is refused, not
// cut), and FILE must be a regular file: a FIFO without a writer or a
// device such as /dev/zero would block or never end.
func readCode(c *cli.Context, lim programLimits) ([]byte, error) {
	args := c.Args().Slice()
	hasCode := c.IsSet("code")
	switch {
	case len(args) > 1:
		return nil, fmt.Errorf("expected one FILE, got %d arguments: %q", len(args), args)
	case hasCode && len(args) == 1:
		return nil, fmt.Errorf("give the program either with -c or as FILE, not both")
	case !hasCode && len(args) == 0:
		return nil, fmt.Errorf("no program: give FILE, - for standard input, or -c CODE")
	}
	var code []byte
	var err error
	switch {
	case hasCode:
		code = []byte(c.String("code"))
		if int64(len(code)) > lim.size {
			err = tooBig(lim, int64(len(code)))
		}
	case args[0] == "-":
		code, err = readStdin(lim)
	default:
		code, err = readFile(args[0], lim)
	}
	if err != nil {
		return nil, err
	}
	if len(code) == 0 {
		return nil, errors.New("the program is empty")
	}
	return code, nil
}

// tooBig is the refusal of a program, or of input, over the limit; n is
// its size, or -1 when only "more than the limit" is known.
func tooBig(lim programLimits, n int64) error {
	if lim.input {
		return job.StdinTooBig(n)
	}
	return job.TooBig(lim.size)
}

// readInput returns the program's standard input from --stdin's FILE, or
// nsbox's own standard input ("-"), bounded as the program is.
func readInput(path string, lim programLimits) ([]byte, error) {
	lim.input = true
	if path == "-" {
		return readStdin(lim)
	}
	return readFile(path, lim)
}

// readBounded reads r to EOF, refusing more than lim.size bytes. hint is
// the size r is expected to have (a file's), 0 when unknown: read into a
// buffer of that size at once, nsbox holds the bytes once, not the
// copies a growing buffer leaves behind.
func readBounded(r io.Reader, lim programLimits, hint int64) ([]byte, error) {
	var buf bytes.Buffer
	if hint > 0 && hint <= lim.size {
		buf.Grow(int(hint) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(r, lim.size+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > lim.size {
		return nil, tooBig(lim, -1)
	}
	return buf.Bytes(), nil
}

// readFile reads the program from path, a regular file.
func readFile(path string, lim programLimits) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO without a writer would block here,
	// before the check below could refuse it; a regular file ignores it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lim.what(), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lim.what(), err)
	}
	if !fi.Mode().IsRegular() {
		if lim.input {
			return nil, fmt.Errorf("read --stdin %s: not a regular file (%s); give a file, or - for nsbox's standard input", path, filekind.Of(fi.Mode()))
		}
		return nil, fmt.Errorf("read program %s: not a regular file (%s); give a file, - for standard input, or -c CODE", path, filekind.Of(fi.Mode()))
	}
	if lim.input && fi.Size() > lim.size {
		return nil, fmt.Errorf("read --stdin %s: %w", path, tooBig(lim, fi.Size()))
	}
	b, err := readBounded(f, lim, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", lim.what(), path, err)
	}
	return b, nil
}

// readStdin reads the program from standard input, which must end within
// lim.wait.
func readStdin(lim programLimits) ([]byte, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := readBounded(os.Stdin, lim, 0)
		done <- read{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("read %s from standard input: %w", lim.what(), r.err)
		}
		return r.b, nil
	case <-time.After(lim.wait):
		return nil, fmt.Errorf("read %s from standard input: it did not end within %v, the run's timeout", lim.what(), lim.wait)
	}
}
