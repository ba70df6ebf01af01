package result

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"unicode/utf8"
)

// writeBufSize is the one buffer WriteJSON writes through. A result up to
// this size leaves in a single Write.
const writeBufSize = 64 << 10

// stream is one captured stream WriteJSON writes from its bytes: name is
// its JSON key ("stdout", "stderr").
type stream struct {
	name string
	raw  []byte
}

// writeStreams writes skel, the encoded result with each of streams
// written as "NAME":"", with the streams' text (and, for bytes that are
// not valid UTF-8, their base64 field) in place of those empty strings.
//
// The splice point is the key with a comma before it and an empty string
// after it. encoding/json escapes every quote inside a string as \", so
// a quote right after a comma is structural: the sequence can only be
// the top-level key itself (no nested type has a "stdout" or "stderr"
// field). NAME_base64 follows NAME in the struct, so writing it right
// after NAME keeps the declaration order.
func writeStreams(w *bufio.Writer, skel []byte, streams []stream) error {
	for _, s := range streams {
		key := []byte(`,"` + s.name + `":""`)
		i := bytes.Index(skel, key)
		if i < 0 || bytes.Contains(skel[i+len(key):], key) {
			return fmt.Errorf("bug: result: %q not found exactly once in the encoded result", key)
		}
		w.Write(skel[:i+len(key)-1]) // up to and including the opening quote
		writeText(w, s.raw)
		w.WriteByte('"')
		if !utf8.Valid(s.raw) {
			w.WriteString(`,"` + s.name + `_base64":"`)
			enc := base64.NewEncoder(base64.StdEncoding, w)
			enc.Write(s.raw)
			enc.Close()
			w.WriteByte('"')
		}
		skel = skel[i+len(key):]
	}
	w.Write(skel)
	// A bufio.Writer keeps its first error and returns it from every
	// later call: Flush reports it.
	return nil
}

// hexDigits are the digits of \u00XX escapes.
const hexDigits = "0123456789abcdef"

// writeText writes b as the body of a JSON string: b as EncodeText's
// text (every run of invalid UTF-8 replaced by one U+FFFD) escaped
// exactly as encoding/json escapes a string without HTML escaping. Runs
// of bytes that need no escape go to w as slices of b, so no copy of b
// is made beyond w's own buffer.
func writeText(w *bufio.Writer, b []byte) {
	start := 0
	invalid := false // the previous byte ended a run of invalid UTF-8
	flush := func(i int) { w.Write(b[start:i]) }
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			invalid = false
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			flush(i)
			switch c {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case '\b':
				w.WriteString(`\b`)
			case '\f':
				w.WriteString(`\f`)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[c>>4])
				w.WriteByte(hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			flush(i)
			if !invalid {
				w.WriteString("\uFFFD")
			}
			invalid = true
			i++
			start = i
			continue
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but not JavaScript: encoding/json escapes
			// them, and so must this, to write the same bytes.
			flush(i)
			w.WriteString(`\u202`)
			w.WriteByte(hexDigits[r&0xF])
			i += size
			start = i
		default:
			i += size
		}
		invalid = false
	}
	flush(len(b))
}
