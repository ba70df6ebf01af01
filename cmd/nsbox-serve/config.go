package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// serveOnly are the settings of nsbox serve that nsbox mcp, which serves
// over stdio, has no use for: in a shared --config file they are skipped
// by mcp, on its command line refused.
var serveOnly = []string{"listen", "token-file", "listen-public"}

// applyConfig sets every flag of fs that the command line left unset from
// the TOML file path: its keys are the flags' names (max-sessions = 4,
// policies = ["default", "datasci"] or "default,datasci"). Each value is
// parsed by its flag, so the file and the command line accept the same
// values. Keys in skip are accepted and ignored; an unknown key, a table,
// or a value its flag refuses is an error naming the file, the line and
// the key.
func applyConfig(fs *flag.FlagSet, path string, set map[string]bool, skip []string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var tree map[string]any
	if _, err := toml.Decode(string(src), &tree); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s:%d: %s", path, pe.Position.Line, pe.Message)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	keys := make([]string, 0, len(tree))
	for k := range tree {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		where := fmt.Sprintf("%s:%d: %s", path, keyLine(src, k), k)
		if _, ok := tree[k].(map[string]any); ok {
			return fmt.Errorf("%s: a table: settings are top-level keys", where)
		}
		if slices.Contains(skip, k) {
			continue
		}
		fl := fs.Lookup(k)
		if fl == nil || k == "config" {
			var known []string
			fs.VisitAll(func(f *flag.Flag) {
				if f.Name != "config" {
					known = append(known, f.Name)
				}
			})
			known = append(known, skip...)
			slices.Sort(known)
			return fmt.Errorf("%s: unknown key (known: %s)", where, strings.Join(known, ", "))
		}
		if set[k] {
			continue // the command line overrides the file
		}
		v, err := configValue(tree[k])
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("%s: invalid value %q (%v): want %s", where, v, err, kindOf(fl))
		}
	}
	return nil
}

// configValue is a TOML value as its flag's text: a string, an integer,
// a boolean, or an array of strings (a comma-separated list).
func configValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return fmt.Sprint(v), nil
	case bool:
		return fmt.Sprint(v), nil
	case []any:
		var parts []string
		for _, e := range v {
			s, ok := e.(string)
			if !ok || strings.Contains(s, ",") {
				return "", errors.New("want an array of strings without commas")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("a %T: want a string, an integer, a boolean or an array of strings", v)
}

// keyLine is the 1-based line where the top-level key k is set (or its
// table begins), 0 when not found (a key written in a form this scan does
// not know).
func keyLine(src []byte, k string) int {
	q := regexp.QuoteMeta(k)
	re := regexp.MustCompile(`^\s*(("` + q + `"|'` + q + `'|` + q + `)\s*[=.]|\[+\s*("` + q + `"|'` + q + `'|` + q + `)\s*[].])`)
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		if re.Match(sc.Bytes()) {
			return n
		}
	}
	return 0
}

// kindOf names what a flag takes, for an error.
func kindOf(fl *flag.Flag) string {
	switch fl.Value.(flag.Getter).Get().(type) {
	case bool:
		return "true or false"
	case int, int64:
		return "an integer"
	}
	return "a string"
}
