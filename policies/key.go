package policies

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The methods of Key: what the rest of the package, and the reference
// page, read from the table.

// Section is the table the key is written in ("limits" for
// limits.timeout), or "" for a top-level key.
func (k *Key) Section() string {
	sec, _, ok := strings.Cut(k.Name, ".")
	if !ok {
		return ""
	}
	return sec
}

// Leaf is the key's name within its table ("timeout" for limits.timeout).
func (k *Key) Leaf() string { return k.Name[strings.LastIndex(k.Name, ".")+1:] }

// Type is the key's TOML type as docs/policies.md names it.
func (k *Key) Type() string { return k.kind().name }

// Range is the key's range such as "100ms..24h", or "" when it has none.
func (k *Key) Range() string {
	if k.bounds == nil {
		return ""
	}
	return k.bounds.String()
}

// Allowed says what values the key accepts: the "(allowed: ...)" text of
// its errors.
func (k *Key) Allowed() string {
	switch {
	case k.allowed != nil:
		return k.allowed()
	case k.bounds != nil:
		return k.bounds.String()
	}
	return k.kind().allowed
}

// List reports whether the key is an array of strings, which a policy with
// extends may edit with KEY_add and KEY_remove.
func (k *Key) List() bool {
	_, ok := k.zero().(*[]string)
	return ok
}

// Line is the key as a policy line, "timeout = \"30s\"", with its
// example value.
func (k *Key) Line() string { return k.Leaf() + " = " + k.Example }

// Format returns the key's value in p as TOML, as "nsbox policy show
// --resolved" writes it.
func (k *Key) Format(p *Policy) string {
	if k.field == nil {
		return ""
	}
	return tomlValue(k.field(p), 0)
}

// probe is a Policy whose fields only show their types: zero points into
// it, and nothing writes it.
var probe Policy

// zero returns a pointer of the key's Go type, to a value that must not be
// written.
func (k *Key) zero() any {
	if k.field == nil {
		return new(string) // extends
	}
	return k.field(&probe)
}

// value returns the key's value in p.
func (k *Key) value(p *Policy) any { return reflect.ValueOf(k.field(p)).Elem().Interface() }

// copyTo copies the key's value from src to dst; lists are cloned.
func (k *Key) copyTo(dst, src *Policy) {
	v := reflect.ValueOf(k.field(src)).Elem()
	if l, ok := v.Interface().([]string); ok {
		v = reflect.ValueOf(slices.Clone(l))
	}
	reflect.ValueOf(k.field(dst)).Elem().Set(v)
}

// keyNamed returns the schema entry name; it panics on a name the schema
// lacks, which is a bug in the caller.
func keyNamed(name string) *Key {
	for i := range schema {
		if schema[i].Name == name {
			return &schema[i]
		}
	}
	panic("policies: no key " + name + " in the schema")
}

// sections lists the tables of the schema in order.
func sections() []string {
	var out []string
	for i := range schema {
		if s := schema[i].Section(); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// topNames lists what may appear at the top level: top-level keys and
// tables, in schema order.
func topNames() []string {
	var out []string
	for i := range schema {
		n, _, _ := strings.Cut(schema[i].Name, ".")
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// leaves lists the key names allowed in the table sec, with the _add and
// _remove forms of each list.
func leaves(sec string) []string {
	var out []string
	for i := range schema {
		k := &schema[i]
		if k.Section() != sec {
			continue
		}
		out = append(out, k.Leaf())
		if k.List() {
			out = append(out, k.Leaf()+addSuffix, k.Leaf()+removeSuffix)
		}
	}
	return out
}

// kind is what a key's Go type means in TOML: its name in the docs, the
// "must be ..." of a type error, and the allowed text when the key says
// nothing more precise.
type kind struct{ name, want, allowed string }

func (k *Key) kind() kind {
	switch k.zero().(type) {
	case *string:
		return kind{"string", "a string", "any string"}
	case *bool:
		return kind{"boolean", "a boolean", "true or false"}
	case *int64:
		return kind{"integer", "an integer", "an integer"}
	case *float64:
		return kind{"number", "a number", "a number"}
	case *Duration:
		return kind{"duration", `a duration string such as "30s"`, `a duration such as "30s"`}
	case *Size:
		return kind{"size", `a size string such as "64KiB" or an integer number of bytes`, sizeSyntax}
	case *[]string:
		return kind{"array of strings", "an array of strings", "an array of strings"}
	case *map[string]string:
		return kind{"table of strings", "a table", `a table of NAME = "value" entries`}
	}
	panic(fmt.Sprintf("policies: key %s has a field of unsupported type %T", k.Name, k.zero()))
}
