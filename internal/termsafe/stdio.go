package termsafe

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Stdio is the program's output and nsbox's own messages on the process's
// standard output and error.
type Stdio struct {
	Out, Err io.Writer // the program's streams (filtered where a terminal shows them)
	Own      io.Writer // nsbox's messages on stderr, each on a fresh line
	line     *Line
}

// NewStdio filters each of os.Stdout and os.Stderr that is a terminal,
// unless raw. nsbox's messages go to stderr: the program's stderr counts
// towards where its cursor is, and so does its stdout when both are the
// same file (one terminal, or 2>&1).
func NewStdio(raw bool) *Stdio {
	l := NewLine()
	return &Stdio{
		Out:  l.Stream(os.Stdout, !raw && IsTerminal(os.Stdout), sameFile(os.Stdout, os.Stderr)),
		Err:  l.Stream(os.Stderr, !raw && IsTerminal(os.Stderr), true),
		Own:  l.Own(os.Stderr),
		line: l,
	}
}

// End is called once the program's streams have ended: an unfinished
// UTF-8 sequence is shown. Nothing else is added: a newline comes only
// before a message of nsbox's own (Own).
func (s *Stdio) End() { s.line.Flush() }

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// sameFile reports whether a and b are one open file's target.
func sameFile(a, b *os.File) bool {
	var sa, sb unix.Stat_t
	if unix.Fstat(int(a.Fd()), &sa) != nil || unix.Fstat(int(b.Fd()), &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
