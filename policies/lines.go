package policies

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// BurntSushi/toml v1.6 records key positions internally but exports them only
// inside decode errors, so keyLines re-scans the source to find the line where
// each key is first written. It runs only on documents the TOML parser has
// already accepted; on anything it does not understand it stops early, and
// lookups then report line 0 ("unknown") rather than a wrong line.

// keyLines maps toml.Key.String() of every key, and every prefix of a key, to
// the 1-based line where it first appears. It understands table headers,
// array-of-tables headers, dotted and quoted keys, inline tables (including
// TOML 1.1 multi-line ones), arrays and all four string forms.
func keyLines(src string) map[string]int {
	sc := &keyScanner{s: src, out: make(map[string]int)}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			sc.newlines = append(sc.newlines, i)
		}
	}
	sc.document()
	return sc.out
}

type keyScanner struct {
	s        string
	i        int
	newlines []int // offsets of '\n', to turn an offset into a line
	out      map[string]int
}

func (sc *keyScanner) document() {
	var table []string
	for {
		sc.skipBlank(true)
		if sc.eof() {
			return
		}
		start := sc.i
		if sc.s[sc.i] == '[' {
			sc.i++
			if sc.peek() == '[' { // [[array.of.tables]]
				sc.i++
			}
			k := sc.key()
			if k == nil {
				return
			}
			table = k
			sc.record(k, start)
		} else {
			k := sc.key()
			if k == nil || !sc.eat('=') {
				return
			}
			full := join(table, k)
			sc.record(full, start)
			sc.skipBlank(false)
			sc.value(full, 0)
		}
		// Only closing brackets, blanks and a comment may follow on this line.
		for !sc.eof() && sc.s[sc.i] != '\n' {
			sc.i++
		}
	}
}

// value skips one TOML value, recording the keys of inline tables under key.
func (sc *keyScanner) value(key []string, depth int) {
	if depth > 64 { // deeper than any policy; give up instead of recursing
		sc.i = len(sc.s)
		return
	}
	rest := sc.s[sc.i:]
	switch {
	case strings.HasPrefix(rest, `"""`), strings.HasPrefix(rest, `'''`):
		q := rest[:3]
		sc.i += 3
		for !sc.eof() && !strings.HasPrefix(sc.s[sc.i:], q) {
			if q[0] == '"' && sc.s[sc.i] == '\\' {
				sc.i++
			}
			sc.i++
		}
		sc.i = min(sc.i+3, len(sc.s))
		// A closing delimiter may be preceded by up to two quotes of content.
		for n := 0; n < 2 && sc.peek() == q[0]; n++ {
			sc.i++
		}
	case rest == "":
	case rest[0] == '"' || rest[0] == '\'':
		sc.quoted()
	case rest[0] == '[':
		sc.i++
		for {
			sc.skipBlank(true)
			switch sc.peek() {
			case 0:
				return
			case ']':
				sc.i++
				return
			case ',':
				sc.i++
			default:
				before := sc.i
				sc.value(key, depth+1)
				if sc.i == before {
					sc.i = len(sc.s)
				}
			}
		}
	case rest[0] == '{':
		sc.i++
		for {
			sc.skipBlank(true)
			switch sc.peek() {
			case 0:
				return
			case '}':
				sc.i++
				return
			case ',':
				sc.i++
			default:
				start := sc.i
				k := sc.key()
				if k == nil || !sc.eat('=') {
					sc.i = len(sc.s)
					return
				}
				full := join(key, k)
				sc.record(full, start)
				sc.skipBlank(false)
				sc.value(full, depth+1)
			}
		}
	default: // number, boolean or date-time (which may contain a space)
		for !sc.eof() && !strings.ContainsRune(",]}#\n", rune(sc.s[sc.i])) {
			sc.i++
		}
	}
}

// key reads a dotted key such as  a . "b c" . 'd'  and returns its parts, or
// nil if there is no key here.
func (sc *keyScanner) key() []string {
	var parts []string
	for {
		sc.skipBlank(false)
		var part string
		switch c := sc.peek(); {
		case c == '"' || c == '\'':
			raw := sc.quoted()
			if c == '\'' {
				part = raw[1 : len(raw)-1]
			} else {
				part = unescape(raw[1 : len(raw)-1])
			}
		case isBare(c):
			start := sc.i
			for isBare(sc.peek()) {
				sc.i++
			}
			part = sc.s[start:sc.i]
		default:
			return nil
		}
		parts = append(parts, part)
		sc.skipBlank(false)
		if !sc.eat('.') {
			return parts
		}
	}
}

// quoted skips a single-line string starting at sc.i and returns it with its
// quotes; an unterminated string is returned as if closed.
func (sc *keyScanner) quoted() string {
	start, q := sc.i, sc.s[sc.i]
	sc.i++
	for !sc.eof() && sc.s[sc.i] != q && sc.s[sc.i] != '\n' {
		if q == '"' && sc.s[sc.i] == '\\' {
			sc.i++
		}
		sc.i++
	}
	if sc.eof() || sc.s[sc.i] != q {
		sc.i = min(sc.i, len(sc.s))
		return sc.s[start:sc.i] + string(q)
	}
	sc.i++
	return sc.s[start:sc.i]
}

// skipBlank skips spaces and tabs, and with newlines also line breaks and
// comments.
func (sc *keyScanner) skipBlank(newlines bool) {
	for !sc.eof() {
		switch sc.s[sc.i] {
		case ' ', '\t':
		case '\r', '\n':
			if !newlines {
				return
			}
		case '#':
			if !newlines {
				return
			}
			for !sc.eof() && sc.s[sc.i] != '\n' {
				sc.i++
			}
			continue
		default:
			return
		}
		sc.i++
	}
}

func (sc *keyScanner) eof() bool { return sc.i >= len(sc.s) }

func (sc *keyScanner) peek() byte {
	if sc.eof() {
		return 0
	}
	return sc.s[sc.i]
}

func (sc *keyScanner) eat(c byte) bool {
	sc.skipBlank(false)
	if sc.peek() != c {
		return false
	}
	sc.i++
	return true
}

// record notes the line of key and of each of its parent tables, keeping the
// first occurrence.
func (sc *keyScanner) record(key []string, offset int) {
	line := sort.SearchInts(sc.newlines, offset) + 1
	for n := 1; n <= len(key); n++ {
		k := toml.Key(key[:n]).String()
		if _, ok := sc.out[k]; !ok {
			sc.out[k] = line
		}
	}
}

func isBare(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func join(a, b []string) []string {
	return append(append(make([]string, 0, len(a)+len(b)), a...), b...)
}

var (
	simpleEscapes = map[byte]rune{'b': '\b', 't': '\t', 'n': '\n', 'f': '\f', 'r': '\r', 'e': 0x1b, '"': '"', '\\': '\\'}
	hexEscapes    = map[byte]int{'x': 2, 'u': 4, 'U': 8}
)

// unescape decodes the escapes of a TOML basic string (TOML 1.1, including
// \e and \xHH). A malformed escape is kept as written.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if r, ok := simpleEscapes[s[i]]; ok {
			b.WriteRune(r)
			continue
		}
		n := hexEscapes[s[i]]
		if n == 0 || i+1+n > len(s) {
			b.WriteByte('\\')
			b.WriteByte(s[i])
			continue
		}
		v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
		if err != nil || !utf8.ValidRune(rune(v)) {
			b.WriteByte('\\')
			b.WriteByte(s[i])
			continue
		}
		b.WriteRune(rune(v))
		i += n
	}
	return b.String()
}
