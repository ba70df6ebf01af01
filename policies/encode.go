package policies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// TOML returns the policy as a complete policy file: every key, in schema
// order, without extends. Parsed back it gives the same policy (but for
// SHA256, which covers the text); this is "nsbox policy show --resolved".
func (p *Policy) TOML() []byte {
	var b bytes.Buffer
	sec := ""
	for i := range schema {
		k := &schema[i]
		if k.field == nil {
			continue
		}
		if m, ok := k.field(p).(*map[string]string); ok {
			fmt.Fprintf(&b, "\n[%s]\n", k.Name)
			for _, name := range sortedKeys(*m) {
				fmt.Fprintf(&b, "%s = %s\n", tomlKey(name), tomlString((*m)[name]))
			}
			continue
		}
		if s := k.Section(); s != sec {
			sec = s
			fmt.Fprintf(&b, "\n[%s]\n", s)
		}
		fmt.Fprintf(&b, "%s = %s\n", k.Leaf(), tomlValue(k.field(p), len(k.Leaf())+3))
	}
	return b.Bytes()
}

// JSON returns the policy as one JSON object: "name" and "sha256", then
// every key in schema order, tables as nested objects. Values are written
// as in TOML: durations and sizes as strings ("30s", "64KiB").
func (p *Policy) JSON() []byte {
	var b bytes.Buffer
	b.WriteString(`{"name":` + jsonString(p.Name) + `,"sha256":` + jsonString(p.SHA256))
	open, sep := "", "," // the section whose object is open; what precedes the next member
	for i := range schema {
		k := &schema[i]
		if k.field == nil {
			continue
		}
		if s := k.Section(); s != open {
			if open != "" {
				b.WriteByte('}')
			}
			if open = s; s != "" {
				b.WriteString("," + jsonString(s) + ":{")
				sep = ""
			}
		}
		v, err := json.Marshal(k.value(p))
		if err != nil {
			// Every field type marshals; an error is a bug in the schema.
			panic(fmt.Sprintf("policies: encode %s as JSON: %v", k.Name, err))
		}
		if string(v) == "null" {
			v = []byte("[]") // a nil list
		}
		b.WriteString(sep + jsonString(k.Leaf()) + ":" + string(v))
		sep = ","
	}
	if open != "" {
		b.WriteByte('}')
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		panic(fmt.Sprintf("policies: indent policy JSON: %v", err))
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// tomlValue writes the value v points to as TOML. A list that does not fit
// on the line after indent columns is written one line per few entries.
func tomlValue(v any, indent int) string {
	switch v := v.(type) {
	case *string:
		return tomlString(*v)
	case *bool:
		return strconv.FormatBool(*v)
	case *int64:
		return strconv.FormatInt(*v, 10)
	case *float64:
		return tomlFloat(*v)
	case *Duration:
		return tomlString(v.String())
	case *Size:
		if *v < 0 {
			return strconv.FormatInt(int64(*v), 10)
		}
		return tomlString(v.String())
	case *[]string:
		return tomlList(*v, indent)
	case *map[string]string:
		parts := make([]string, 0, len(*v))
		for _, name := range sortedKeys(*v) {
			parts = append(parts, tomlKey(name)+" = "+tomlString((*v)[name]))
		}
		if len(parts) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	panic(fmt.Sprintf("policies: no TOML form for %T", v))
}

// lineWidth is where tomlList wraps.
const lineWidth = 78

func tomlList(list []string, indent int) string {
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = tomlString(s)
	}
	if one := "[" + strings.Join(quoted, ", ") + "]"; indent+len(one) <= lineWidth {
		return one
	}
	var b strings.Builder
	b.WriteString("[\n ")
	col := 1
	for _, q := range quoted {
		if col+1+len(q)+1 > lineWidth {
			b.WriteString("\n ")
			col = 1
		}
		b.WriteString(" " + q + ",")
		col += 1 + len(q) + 1
	}
	b.WriteString("\n]")
	return b.String()
}

func tomlFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// bareKey matches the keys TOML accepts without quotes.
var bareKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

func tomlKey(k string) string {
	if bareKey().MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlString writes s as a TOML basic string: quotes, backslashes and
// control characters escaped, everything else as is.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
