package termsafe

import (
	"bytes"
	"strings"
	"testing"
)

func TestFilter(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text\n", "plain text\n"},
		{"tab\tcr\rbs\b\n", "tab\tcr\rbs\b\n"},
		// CSI: clear the screen, move the cursor up.
		{"\x1b[2J\x1b[1A", "^[[2J^[[1A"},
		// OSC 52: set the clipboard; OSC 0: the window title (BEL-ended).
		{"\x1b]52;c;ZXZpbA==\x07", "^[]52;c;ZXZpbA==^G"},
		{"\x1b]0;title\x1b\\", "^[]0;title^[\\"},
		{"nul\x00del\x7f", "nul^@del^?"},
		// C1 CSI and OSC encoded in UTF-8, and as raw bytes.
		{"\u009b2J\u009d0;t", "<U+009B>2J<U+009D>0;t"},
		{"\x9b2J", "<0x9B>2J"},
		// Bidirectional overrides and isolates.
		{"abc\u202edcba\u2066x\u2069", "abc<U+202E>dcba<U+2066>x<U+2069>"},
		// Ordinary non-ASCII text passes.
		{"héllo wörld ✓ 数据\n", "héllo wörld ✓ 数据\n"},
		{"\xff\xfe", "\xff\xfe"},
	} {
		var b bytes.Buffer
		w := NewLine().Stream(&b, true, false)
		if n, err := w.Write([]byte(c.in)); err != nil || n != len(c.in) {
			t.Errorf("Write(%q) = %d, %v", c.in, n, err)
		}
		w.Flush()
		if b.String() != c.want {
			t.Errorf("filter(%q) = %q, want %q", c.in, b.String(), c.want)
		}
	}
}

// TestSplitWrites: a sequence cut anywhere between writes is filtered as
// if it came in one write.
func TestSplitWrites(t *testing.T) {
	in := "a\u009b1m✓\u202eb\x1b[0m数"
	want := "a<U+009B>1m✓<U+202E>b^[[0m数"
	for cut := 0; cut <= len(in); cut++ {
		var b bytes.Buffer
		w := NewLine().Stream(&b, true, false)
		w.Write([]byte(in[:cut]))
		w.Write([]byte(in[cut:]))
		w.Flush()
		if b.String() != want {
			t.Errorf("cut at %d: %q, want %q", cut, b.String(), want)
		}
	}
	// An unfinished sequence at the end is shown escaped.
	var b bytes.Buffer
	w := NewLine().Stream(&b, true, false)
	w.Write([]byte("x\xe2\x9c"))
	w.Flush()
	if b.String() != "x\xe2<0x9C>" {
		t.Errorf("unfinished: %q", b.String())
	}
}

func TestRaw(t *testing.T) {
	var b bytes.Buffer
	w := NewLine().Stream(&b, false, false)
	w.Write([]byte("\x1b[2J"))
	if b.String() != "\x1b[2J" {
		t.Errorf("raw stream changed its bytes: %q", b.String())
	}
}

// TestOwnLinesStartFresh: nsbox's messages start a line whichever stream
// left the cursor mid-line; a stream not on the terminal does not count.
func TestOwnLinesStartFresh(t *testing.T) {
	var term, file bytes.Buffer
	l := NewLine()
	out := l.Stream(&term, true, true)
	errs := l.Stream(&term, true, true)
	other := l.Stream(&file, false, false)
	own := l.Own(&term)
	out.Write([]byte("progress 10%"))
	own.Write([]byte("nsbox: first\n"))
	errs.Write([]byte("done\n"))
	other.Write([]byte("no newline"))
	own.Write([]byte("nsbox: second\n"))
	errs.Write([]byte("\x1b[1A\x1b[2Kfake"))
	l.Flush()
	l.Fresh(&term)
	own.Write([]byte("nsbox: third\n"))
	want := "progress 10%\nnsbox: first\ndone\nnsbox: second\n^[[1A^[[2Kfake\nnsbox: third\n"
	if term.String() != want {
		t.Errorf("terminal shows %q, want %q", term.String(), want)
	}
	if !strings.Contains(file.String(), "no newline") {
		t.Errorf("file %q", file.String())
	}
}
