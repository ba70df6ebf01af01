// Package termsafe keeps a sandboxed program's output from driving the
// terminal nsbox's own output goes to.
//
// A terminal obeys control sequences in the bytes it displays: ESC and
// CSI sequences move the cursor, erase lines and set colours; OSC
// sequences set the window title, write hyperlinks and, through OSC 52,
// the clipboard; bidirectional overrides reorder what is shown. A program
// that prints them could hide or fake nsbox's status lines, or reach the
// user's clipboard. Like less(1) and systemd's journal viewer, the Writer
// shows such bytes as visible text instead: C0 controls and DEL in caret
// notation (ESC is "^["), C1 controls, bidirectional controls and raw
// bytes 0x80-0x9f that are not UTF-8 as "<U+009B>" or "<0x9B>". Newline,
// tab, carriage return and backspace pass: they move within the
// program's own lines only, since nsbox's lines always start on a fresh
// line (Line).
//
// The filter works on a stream: a UTF-8 sequence split across writes is
// held until it completes (Flush shows an unfinished one escaped).
// nsbox's own messages go through Line.Own, which starts each on a fresh
// line when the program left the cursor mid-line.
package termsafe

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// Line records whether the terminal's cursor is in the middle of a line,
// from the bytes written to it through its writers, so that nsbox's own
// messages start on a fresh line.
type Line struct {
	mu      sync.Mutex
	mid     bool
	streams []*Writer // the program's streams (Flush)
}

// NewLine returns a Line for a terminal whose cursor starts at the start
// of a line.
func NewLine() *Line { return &Line{} }

// Writer is one of the program's streams on its way to w.
type Writer struct {
	w        io.Writer
	line     *Line // nil: the stream does not go to the terminal Line tracks
	sanitize bool
	mu       sync.Mutex // guards pend
	pend     []byte     // the start of a UTF-8 sequence split across writes
}

// Stream returns the writer for one of the program's output streams going
// to w. sanitize turns the filter on (w is a terminal and the caller did
// not ask for raw output); track says that w shows on l's terminal.
func (l *Line) Stream(w io.Writer, sanitize, track bool) *Writer {
	sw := &Writer{w: w, sanitize: sanitize}
	if track {
		sw.line = l
	}
	l.mu.Lock()
	l.streams = append(l.streams, sw)
	l.mu.Unlock()
	return sw
}

// Write filters p and writes it. It returns len(p) when everything was
// written, whatever the filter turned it into.
func (sw *Writer) Write(p []byte) (int, error) {
	out := p
	if sw.sanitize {
		sw.mu.Lock()
		out = sw.filter(p)
		sw.mu.Unlock()
	}
	if len(out) == 0 {
		return len(p), nil
	}
	if err := sw.put(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush shows a UTF-8 sequence the stream left unfinished, escaped. Call
// it once the stream has ended.
func (sw *Writer) Flush() error {
	sw.mu.Lock()
	var b []byte
	for _, c := range sw.pend {
		b = appendByte(b, c)
	}
	sw.pend = nil
	sw.mu.Unlock()
	if len(b) == 0 {
		return nil
	}
	return sw.put(b)
}

// put writes b to the stream's writer and records where the cursor is.
func (sw *Writer) put(b []byte) error {
	if sw.line != nil {
		sw.line.mu.Lock()
		defer sw.line.mu.Unlock()
	}
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	if sw.line != nil {
		sw.line.mid = b[len(b)-1] != '\n'
	}
	return nil
}

// Flush flushes every stream of l (Writer.Flush), once they have ended.
func (l *Line) Flush() {
	l.mu.Lock()
	streams := append([]*Writer(nil), l.streams...)
	l.mu.Unlock()
	for _, s := range streams {
		s.Flush()
	}
}

// Fresh writes a newline to w when the cursor is mid-line, so that what
// nsbox writes next starts a line.
func (l *Line) Fresh(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mid {
		w.Write([]byte("\n"))
		l.mid = false
	}
}

// Own returns a writer for nsbox's own messages on w (l's terminal):
// each write starts on a fresh line.
func (l *Line) Own(w io.Writer) io.Writer { return ownWriter{l, w} }

type ownWriter struct {
	l *Line
	w io.Writer
}

func (o ownWriter) Write(p []byte) (int, error) {
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	if o.l.mid && len(p) > 0 {
		if _, err := o.w.Write([]byte("\n")); err != nil {
			return 0, err
		}
		o.l.mid = false
	}
	n, err := o.w.Write(p)
	if n > 0 {
		o.l.mid = p[n-1] != '\n'
	}
	return n, err
}

// filter returns p with every control sequence made visible, holding back
// an unfinished UTF-8 sequence at its end.
func (sw *Writer) filter(p []byte) []byte {
	if len(sw.pend) > 0 {
		p = append(sw.pend, p...)
		sw.pend = nil
	}
	out := make([]byte, 0, len(p)+len(p)/8)
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			out = appendByte(out, c)
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			sw.pend = append([]byte(nil), p[i:]...)
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = appendByte(out, c)
		case unsafeRune(r):
			out = fmt.Appendf(out, "<U+%04X>", r)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	return out
}

// appendByte appends c, a single byte (ASCII or not valid UTF-8), made
// visible when it is a control.
func appendByte(out []byte, c byte) []byte {
	switch {
	case c == '\n' || c == '\t' || c == '\r' || c == '\b':
		return append(out, c)
	case c < 0x20:
		return append(out, '^', c+'@')
	case c == 0x7f:
		return append(out, '^', '?')
	case c >= 0x80 && c <= 0x9f:
		return fmt.Appendf(out, "<0x%02X>", c)
	}
	return append(out, c)
}

// unsafeRune reports whether r is a C1 control or changes the direction
// in which text is shown.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1: CSI (U+009B), OSC (U+009D), ...
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // ALM, LRM, RLM
		return true
	case r >= 0x202a && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	}
	return false
}
