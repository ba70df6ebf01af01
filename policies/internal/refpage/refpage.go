// Package refpage renders docs/policies.md, the policy reference, from the
// key table (policies.Keys), the built-in policies and the hand-written
// text in page.md.tmpl. go generate ./policies writes the page
// (policies/internal/gendoc); a test in policies fails when the checked-in
// page differs from what Render returns.
package refpage

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/BurntSushi/toml"

	"github.com/nsbox/nsbox/policies"
)

//go:embed page.md.tmpl
var pageText string

// page is what the template sees.
type page struct {
	Builtins        []builtin
	Groups          []group
	MaxExtendsDepth int
	MaxFileSize     policies.Size
}

type builtin struct {
	Name, Description, Extends string
	Policy                     *policies.Policy
}

// group is the keys of one table, or the top-level keys.
type group struct {
	Title string // "Top level", "[limits]"
	Keys  []key
}

type key struct {
	policies.Key
	Anchor string   // the heading's anchor
	Values []string // the built-ins' values, in Builtins order, short
}

// Render returns docs/policies.md.
func Render() ([]byte, error) {
	var pg page
	pg.MaxExtendsDepth, pg.MaxFileSize = policies.MaxExtendsDepth, policies.MaxFileSize
	for _, name := range policies.BuiltinNames() {
		p, err := policies.Builtin(name)
		if err != nil {
			return nil, err
		}
		_, text, err := policies.Source(name)
		if err != nil {
			return nil, err
		}
		var head struct{ Extends string }
		if _, err := toml.Decode(string(text), &head); err != nil {
			return nil, fmt.Errorf("built-in %s: %w", name, err)
		}
		pg.Builtins = append(pg.Builtins, builtin{Name: name, Description: p.Description, Extends: head.Extends, Policy: p})
	}
	for _, k := range policies.Keys() {
		title := "Top level"
		switch {
		case k.Section() != "":
			title = "[" + k.Section() + "]"
		case k.Type() == "table of strings":
			title = "[" + k.Name + "]"
		}
		if len(pg.Groups) == 0 || pg.Groups[len(pg.Groups)-1].Title != title {
			pg.Groups = append(pg.Groups, group{Title: title})
		}
		g := &pg.Groups[len(pg.Groups)-1]
		kd := key{Key: k, Anchor: strings.ReplaceAll(k.Name, ".", "")}
		for _, b := range pg.Builtins {
			kd.Values = append(kd.Values, short(&k, b))
		}
		g.Keys = append(g.Keys, kd)
	}
	tmpl, err := template.New("page").Funcs(template.FuncMap{"code": code, "md": md}).Parse(pageText)
	if err != nil {
		return nil, fmt.Errorf("parse page.md.tmpl: %w", err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, pg); err != nil {
		return nil, fmt.Errorf("render page.md.tmpl: %w", err)
	}
	return b.Bytes(), nil
}

// short is the value of k in the built-in b for the overview table: long
// lists by their length, extends as the file writes it.
func short(k *policies.Key, b builtin) string {
	if k.Name == "extends" {
		if b.Extends == "" {
			return "—"
		}
		return code(`"` + b.Extends + `"`)
	}
	v := k.Format(b.Policy)
	if k.List() {
		var list struct{ V []string }
		if _, err := toml.Decode("V = "+v, &list); err == nil && len(list.V) > 3 {
			return fmt.Sprintf("%d entries", len(list.V))
		}
	}
	if v == "{}" {
		return "none"
	}
	return code(v)
}

// code writes s as Markdown code, safe inside a table cell.
func code(s string) string {
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// md escapes the characters Markdown would read as markup in plain text
// (__import__ would turn bold). An underscore inside a word (LD_PRELOAD)
// is plain text already and left alone.
func md(s string) string {
	alnum := func(i int) bool {
		if i < 0 || i >= len(s) {
			return false
		}
		c := s[i]
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if strings.IndexByte("\\`*[]<>|", c) >= 0 || c == '_' && !(alnum(i-1) && alnum(i+1)) {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
