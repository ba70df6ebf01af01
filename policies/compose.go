package policies

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// MaxExtendsDepth is how many parents a policy may have, one above the
// other. A real policy needs one or two; the bound turns a runaway chain
// of files into an error that names it.
const MaxExtendsDepth = 8

// source is the text of a policy and where it came from.
type source struct {
	name string // becomes Policy.Name: the built-in name, or the path as given
	file string // named in errors: "NAME.toml" for a built-in, else the path
	dir  string // where a relative extends path starts; "" for a built-in
	id   string // identity in an extends chain: "builtin NAME" or an absolute path
	data []byte
}

// resolved is a policy after extends, with where each value came from.
type resolved struct {
	p *Policy
	// base is the file at the top of the chain, which set every key not
	// in set.
	base *decoder
	// set maps the keys (toml.Key strings; env.NAME for [env]) given or
	// edited by a file below base to that file.
	set map[string]origin
}

// origin is where a value was written: the file, and the key whose line
// to report (imports_add for a list edited there).
type origin struct {
	d   *decoder
	key string
}

func (r *resolved) origin(key string) origin {
	if o, ok := r.set[key]; ok {
		return o
	}
	return origin{r.base, key}
}

// load decodes src, resolves its extends chain and validates the result.
// chain holds the policies that extend src, nearest last.
func load(src *source, chain []*source) (*resolved, error) {
	l, err := decode(src.file, src.data)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	sum.Write(src.data)
	if l.extends == "" {
		p := &l.p
		p.Name, p.SHA256 = src.name, hex.EncodeToString(sum.Sum(nil))
		if err := p.validate(src.file, l.d.line); err != nil {
			return nil, err
		}
		return &resolved{p: p, base: l.d}, nil
	}

	psrc, err := l.parentSource(src, chain)
	if err != nil {
		return nil, err
	}
	parent, err := load(psrc, append(chain, src))
	if err != nil {
		return nil, err // it names the parent's file and line
	}
	r, err := l.merge(parent, psrc.name)
	if err != nil {
		return nil, err
	}
	// The hash identifies what the run got: this file's text and, through
	// the parent's hash, every file above it.
	sum.Write([]byte(parent.p.SHA256))
	r.p.Name, r.p.SHA256 = src.name, hex.EncodeToString(sum.Sum(nil))
	if err := r.p.check(l.reporter(r)); err != nil {
		return nil, err
	}
	return r, nil
}

// parentSource finds the policy l extends: a built-in name (a bare word)
// or a path, relative to the directory of src. It refuses a cycle and a
// chain deeper than MaxExtendsDepth, naming the chain.
func (l *layer) parentSource(src *source, chain []*source) (*source, error) {
	at := func(format string, args ...any) error { return l.d.errorf(keyExtends, format, args...) }
	ext := l.extends
	var parent *source
	if !strings.Contains(ext, "/") && !strings.HasSuffix(ext, ".toml") {
		if !slices.Contains(builtinNames, ext) {
			return nil, at("%q is not a built-in policy (allowed: %s)", ext, keyNamed(keyExtends).Allowed())
		}
		parent = builtinSource(ext)
	} else {
		if src.dir == "" {
			return nil, at("%q: a built-in policy extends only built-ins", ext)
		}
		path := ext
		if !filepath.IsAbs(path) {
			path = filepath.Join(src.dir, path)
		}
		var err error
		if parent, err = fileSource(path); err != nil {
			return nil, at("%v", err)
		}
	}
	all := append(slices.Clone(chain), src)
	for i, s := range all {
		if s.id == parent.id {
			return nil, at("cycle: %s", chainText(append(all[i:], parent)))
		}
	}
	if len(all) > MaxExtendsDepth {
		return nil, at("more than %d policies above this one: %s", MaxExtendsDepth, chainText(append(all, parent)))
	}
	return parent, nil
}

// chainText names each policy of an extends chain: "a.toml extends b.toml".
func chainText(chain []*source) string {
	names := make([]string, len(chain))
	for i, s := range chain {
		names[i] = s.file
	}
	return strings.Join(names, " extends ")
}

// merge lays l over its resolved parent: keys l sets replace the parent's
// values, [env] is merged with l winning, and l's list edits apply to the
// inherited lists.
func (l *layer) merge(parent *resolved, parentName string) (*resolved, error) {
	p := &Policy{Env: maps.Clone(parent.p.Env)}
	r := &resolved{p: p, base: parent.base, set: maps.Clone(parent.set)}
	if r.set == nil {
		r.set = map[string]origin{}
	}
	for i := range schema {
		k := &schema[i]
		if k.field == nil {
			continue
		}
		if _, ok := k.zero().(*map[string]string); ok {
			for name, v := range *k.field(&l.p).(*map[string]string) {
				key := envKey(k.Name, name)
				(*k.field(p).(*map[string]string))[name] = v
				r.set[key] = origin{l.d, key}
			}
			continue
		}
		if l.set[k.Name] {
			k.copyTo(p, &l.p)
			r.set[k.Name] = origin{l.d, k.Name}
			continue
		}
		k.copyTo(p, parent.p)
		if e, ok := l.edits[k.Name]; ok {
			list, err := l.edit(k, *k.field(p).(*[]string), e, parentName)
			if err != nil {
				return nil, err
			}
			*k.field(p).(*[]string) = list
			r.set[k.Name] = origin{l.d, e.key}
		}
	}
	return r, nil
}

// edit applies e to list, the inherited value of k. Removing an entry the
// list lacks and adding one it has are errors: either means the file was
// written against another parent than the one it gets. The result is in
// canonical order (k.values, else sorted): the lists are sets.
func (l *layer) edit(k *Key, list []string, e listEdit, parentName string) ([]string, error) {
	rmKey, addKey := k.Name+removeSuffix, k.Name+addSuffix
	for _, x := range e.remove {
		switch {
		case slices.Contains(e.add, x):
			return nil, l.d.errorf(rmKey, "%q is also in %s%s; write it in one of them", x, k.Leaf(), addSuffix)
		case !slices.Contains(list, x):
			return nil, l.d.errorf(rmKey, "%q is not in the %s inherited from %s, so it cannot be removed", x, k.Leaf(), parentName)
		}
		list = slices.DeleteFunc(list, func(s string) bool { return s == x })
	}
	for _, x := range e.add {
		if slices.Contains(list, x) {
			return nil, l.d.errorf(addKey, "%q is already in the %s inherited from %s", x, k.Leaf(), parentName)
		}
		list = append(list, x)
	}
	if k.values != nil {
		order := k.values()
		slices.SortStableFunc(list, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	} else {
		slices.Sort(list)
	}
	return list, nil
}

// reporter places an error about the resolved policy r at the line its
// value came from. A value l inherited is reported at l's extends line,
// with the parent's file and line: the conflict is with something l set.
func (l *layer) reporter(r *resolved) reporter {
	return func(key, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		o := r.origin(key)
		if o.d == l.d {
			return &Error{File: l.d.file, Line: l.d.line(o.key), Key: key, Msg: msg}
		}
		where := o.d.file
		if n := o.d.line(o.key); n > 0 {
			where = fmt.Sprintf("%s:%d", where, n)
		}
		return &Error{File: l.d.file, Line: l.d.line(keyExtends), Key: key, Msg: msg + " (inherited from " + where + ")"}
	}
}

// envKey is the name errors give a variable of [env]: env.NAME.
func envKey(table, name string) string { return toml.Key{table, name}.String() }
