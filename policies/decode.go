package policies

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// decoder holds one parsed policy document and produces *Error values that
// point at the offending line.
type decoder struct {
	file  string
	src   string
	tree  map[string]any
	lines map[string]int // from keyLines, computed on the first error
}

// layer is what one policy file says, before extends is applied: the keys
// it sets and the edits it makes to inherited lists.
type layer struct {
	d       *decoder
	extends string              // "" without extends
	set     map[string]bool     // keys set in full, by name
	edits   map[string]listEdit // by the list's key name
	p       Policy              // the values of the keys in set
}

// listEdit is what a file adds to and removes from an inherited list.
type listEdit struct {
	add, remove []string
	key         string // the first of KEY_add, KEY_remove in the file, for error lines
}

// decode parses data and checks it against the schema: syntax, unknown
// keys, types, entries of lists, and (without extends) that every required
// key is present. Ranges and checks across keys are left to validation,
// which runs on the resolved policy.
func decode(file string, data []byte) (*layer, error) {
	d := &decoder{file: file, src: string(data)}
	md, err := toml.Decode(d.src, &d.tree)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: file, Line: pe.Position.Line,
				Msg: fmt.Sprintf("invalid TOML at column %d: %s", pe.Position.Col, pe.Message)}
		}
		return nil, &Error{File: file, Msg: "invalid TOML: " + err.Error()}
	}
	if err := d.checkKeys(md.Keys()); err != nil {
		return nil, err
	}
	if err := d.checkTables(); err != nil {
		return nil, err
	}
	l := &layer{d: d, set: map[string]bool{}, edits: map[string]listEdit{}, p: Policy{Env: map[string]string{}, Network: Network{Allow: []string{}}, Allowlist: Allowlist{Preload: []string{}}}}
	for i := range schema {
		if err := l.decodeKey(&schema[i]); err != nil {
			return nil, err
		}
	}
	for i := range schema {
		k := &schema[i]
		e, ok := l.edits[k.Name]
		switch {
		case !ok:
		case !l.set[keyExtends]:
			return nil, d.errorf(e.key, "needs extends: there is no inherited %s to edit (allowed: %s = [...] with the whole list, or extends = %s above it)",
				k.Leaf(), k.Leaf(), keyNamed(keyExtends).Example)
		case l.set[k.Name]:
			return nil, d.errorf(e.key, "cannot be combined with %s in one file: %s replaces the inherited list (allowed: either %s, or %s%s and %s%s)",
				k.Leaf(), k.Leaf(), k.Leaf(), k.Leaf(), addSuffix, k.Leaf(), removeSuffix)
		}
	}
	if l.set[keyExtends] {
		if l.extends == "" {
			return nil, d.errorf(keyExtends, `"" names no policy (allowed: %s)`, keyNamed(keyExtends).Allowed())
		}
		return l, nil
	}
	for i := range schema {
		k := &schema[i]
		if k.Required && !l.set[k.Name] {
			sec := k.Section()
			return nil, &Error{File: file, Line: d.line(sec), Key: k.Name, Msg: fmt.Sprintf(
				"missing required key; policies have no hidden defaults, so add e.g. %s under [%s], or extend a policy that sets it (allowed: %s)",
				k.Line(), sec, k.Allowed())}
		}
	}
	return l, nil
}

// decodeKey reads k, and for a list its _add and _remove forms, when the
// document has them.
func (l *layer) decodeKey(k *Key) error {
	d := l.d
	if v := d.lookup(k.Name); v != nil {
		dst := any(&l.extends)
		if k.field != nil {
			dst = k.field(&l.p)
		}
		if err := d.value(k, k.Name, v, dst); err != nil {
			return err
		}
		l.set[k.Name] = true
	}
	if !k.List() {
		return nil
	}
	var e listEdit
	for _, form := range []struct {
		suffix string
		dst    *[]string
	}{{addSuffix, &e.add}, {removeSuffix, &e.remove}} {
		key := k.Name + form.suffix
		v := d.lookup(key)
		if v == nil {
			continue
		}
		if err := d.value(k, key, v, form.dst); err != nil {
			return err
		}
		if err := checkEntries(k, *form.dst, key, d.errorf); err != nil {
			return err
		}
		if e.key == "" {
			e.key = key
		}
	}
	if e.key != "" {
		l.edits[k.Name] = e
	}
	return nil
}

// checkKeys rejects, in document order, the first key the schema does not
// know. It matches names exactly: toml.MetaData.Undecoded would accept
// "Timeout" for "timeout" because the library folds case when it fills
// struct fields, so unknown keys are found against md.Keys() instead.
func (d *decoder) checkKeys(keys []toml.Key) error {
	top, known := topNames(), map[string][]string{}
	for _, sec := range sections() {
		known[sec] = leaves(sec)
	}
	for _, k := range keys {
		if !slices.Contains(top, k[0]) {
			return d.unknown(k[:1], top)
		}
		if names, ok := known[k[0]]; ok && len(k) > 1 && !slices.Contains(names, k[1]) {
			return d.unknown(k[:2], names)
		}
		// Deeper keys (limits.timeout.x, env.A.B) are type errors, reported
		// with the expected type when the value is read.
	}
	return nil
}

func (d *decoder) unknown(k toml.Key, known []string) error {
	where := "at the top level"
	if len(k) > 1 {
		where = "in [" + k[0] + "]"
	}
	kind := "key"
	if _, ok := d.lookupKey(k).(map[string]any); ok {
		kind = "table"
	}
	msg := fmt.Sprintf("unknown %s%s (allowed %s: %s)", kind, suggest(k, known), where, strings.Join(known, ", "))
	return d.errorf(k.String(), "%s", msg)
}

// checkTables rejects a section ([limits]) given as something else than a
// table.
func (d *decoder) checkTables() error {
	for _, sec := range sections() {
		if v, ok := d.tree[sec]; ok {
			if _, ok := v.(map[string]any); !ok {
				return d.errorf(sec, "must be a table, not %s (allowed: a [%s] table with %s)", tomlType(v), sec, strings.Join(leaves(sec), ", "))
			}
		}
	}
	return nil
}

// value checks that v, the document's value at key, has k's type, and
// stores it in dst, a pointer of that type. Ranges are left to validation.
func (d *decoder) value(k *Key, key string, v any, dst any) error {
	switch dst := dst.(type) {
	case *string:
		s, ok := v.(string)
		if !ok {
			return d.typeErr(k, key, v)
		}
		*dst = s
	case *bool:
		b, ok := v.(bool)
		if !ok {
			return d.typeErr(k, key, v)
		}
		*dst = b
	case *int64:
		n, ok := v.(int64)
		if !ok {
			return d.typeErr(k, key, v)
		}
		*dst = n
	case *float64:
		// A TOML float or integer: "cpus = 1" and "cpus = 1.0".
		switch v := v.(type) {
		case float64:
			*dst = v
		case int64:
			*dst = float64(v)
		default:
			return d.typeErr(k, key, v)
		}
	case *Duration:
		s, ok := v.(string)
		if !ok {
			return d.typeErr(k, key, v)
		}
		t, err := time.ParseDuration(s)
		if err != nil {
			return d.errorf(key, `%q is not a duration (allowed: a duration such as "30s", "1m30s" or "500ms" in %s)`, s, k.Allowed())
		}
		*dst = Duration{t}
	case *Size:
		switch v := v.(type) {
		case int64:
			*dst = Size(v)
		case string:
			s, err := parseSize(v)
			if err != nil {
				return d.errorf(key, "%v (allowed: %s; %s)", err, sizeSyntax, k.Allowed())
			}
			*dst = s
		default:
			return d.typeErr(k, key, v)
		}
	case *[]string:
		a, ok := v.([]any)
		if !ok {
			return d.typeErr(k, key, v)
		}
		out := make([]string, 0, len(a))
		for i, e := range a {
			s, ok := e.(string)
			if !ok {
				return d.errorf(key, "element %d must be a string, not %s (allowed: %s)", i+1, tomlType(e), k.Allowed())
			}
			out = append(out, s)
		}
		*dst = out
	case *map[string]string:
		m, ok := v.(map[string]any)
		if !ok {
			return d.typeErr(k, key, v)
		}
		for _, name := range sortedKeys(m) {
			s, ok := m[name].(string)
			if !ok {
				return d.errorf(toml.Key{key, name}.String(), "must be a string, not %s (allowed: a string)", tomlType(m[name]))
			}
			(*dst)[name] = s
		}
	default:
		panic(fmt.Sprintf("policies: key %s has a field of unsupported type %T", k.Name, dst))
	}
	return nil
}

func (d *decoder) typeErr(k *Key, key string, v any) error {
	return d.errorf(key, "must be %s, not %s (allowed: %s)", k.kind().want, tomlType(v), k.Allowed())
}

// errorf builds an *Error for key (a toml.Key string) at the key's line.
func (d *decoder) errorf(key, format string, args ...any) error {
	return &Error{File: d.file, Line: d.line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// line returns the line where key (a toml.Key string) is written, or 0.
func (d *decoder) line(key string) int {
	if d.lines == nil {
		d.lines = keyLines(d.src)
	}
	return d.lines[key]
}

// lookup returns the value at a schema name in the document, or nil.
// Schema names are bare keys, so splitting at dots is exact.
func (d *decoder) lookup(name string) any { return d.lookupKey(strings.Split(name, ".")) }

// lookupKey returns the value at k in the document, or nil.
func (d *decoder) lookupKey(k toml.Key) any {
	var v any = d.tree
	for _, part := range k {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
