package policies

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeFiles writes name → text under dir, creating directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(text), 0o644))
	}
}

func TestExtendsInherits(t *testing.T) {
	def, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	doc := "extends = \"default\"\n[limits]\ntimeout = \"5s\"\n[env]\nTZ = \"UTC\"\n"
	p, err := Parse("child.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := *def
	want.Name = "child.toml"
	want.SHA256 = p.SHA256
	want.Limits.Timeout = Duration{5 * time.Second}
	want.Env = map[string]string{"TZ": "UTC"}
	if !reflect.DeepEqual(p, &want) {
		t.Errorf("child of default =\n%+v\nwant\n%+v", p, &want)
	}
	// The child's lists are its own: editing them leaves a fresh parent alone.
	p.Allowlist.Imports[0] = "changed"
	if again, _ := Builtin("default"); again.Allowlist.Imports[0] == "changed" {
		t.Error("child shares its imports with the parent")
	}
}

func TestExtendsListEdits(t *testing.T) {
	doc := `extends = "default"
[sandbox]
require_remove = ["cgroups"]
require_add = ["landlock"]
[allowlist]
imports_add = ["numpy", "PIL"]
imports_remove = ["os", "sys"]
deny_builtins_add = ["eval"]
deny_events_remove = ["os.system"]
`
	p, err := Parse("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	def, _ := Builtin("default")
	// require comes out in check order, deny_builtins in the runner's
	// order, the free-form lists sorted.
	if want := []string{"namespaces", "seccomp", "landlock", "memfd_noexec"}; !slices.Equal(p.Sandbox.Require, want) {
		t.Errorf("require = %v, want %v", p.Sandbox.Require, want)
	}
	if want := []string{"eval", "open"}; !slices.Equal(p.Allowlist.DenyBuiltins, want) {
		t.Errorf("deny_builtins = %v, want %v", p.Allowlist.DenyBuiltins, want)
	}
	imports := slices.DeleteFunc(slices.Clone(def.Allowlist.Imports), func(s string) bool { return s == "os" || s == "sys" })
	imports = append(imports, "numpy", "PIL")
	slices.Sort(imports)
	if !slices.Equal(p.Allowlist.Imports, imports) {
		t.Errorf("imports = %v, want %v", p.Allowlist.Imports, imports)
	}
	if slices.Contains(p.Allowlist.DenyEvents, "os.system") || len(p.Allowlist.DenyEvents) != len(def.Allowlist.DenyEvents)-1 {
		t.Errorf("deny_events = %v", p.Allowlist.DenyEvents)
	}
	// Removing every entry leaves an empty list, not a missing one.
	q, err := Parse("c.toml", []byte("extends = \"strict\"\n[sandbox]\nrequire_remove = [\"namespaces\", \"cgroups\", \"seccomp\", \"memfd_noexec\"]\n"))
	if err != nil || q.Sandbox.Require == nil || len(q.Sandbox.Require) != 0 {
		t.Errorf("require after removing all = %#v, %v", q.Sandbox.Require, err)
	}
}

func TestExtendsPaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(t.TempDir()) // relative paths must not start from here
	writeFiles(t, dir, map[string]string{
		"team/base.toml": "extends = \"strict\"\ndescription = \"team base\"\n[limits]\ntimeout = \"20s\"\n[env]\nA = \"base\"\nB = \"base\"\n",
		"proj/p.toml":    "extends = \"../team/base.toml\"\n[limits]\nmemory = \"128MiB\"\n[env]\nB = \"proj\"\n",
		"proj/q.toml":    "extends = \"" + filepath.Join(dir, "proj/p.toml") + "\"\n",
	})
	p, err := LoadFile(filepath.Join(dir, "proj/q.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Description != "team base" || p.Limits.Timeout.Duration != 20*time.Second || p.Limits.Memory != 128*mib ||
		p.Limits.Pids != 32 || !p.Allowlist.StrictAttributes {
		t.Errorf("q = %+v", p)
	}
	if want := map[string]string{"A": "base", "B": "proj"}; !reflect.DeepEqual(p.Env, want) {
		t.Errorf("env = %v, want %v (the child wins)", p.Env, want)
	}
	if p.Name != filepath.Join(dir, "proj/q.toml") {
		t.Errorf("name = %q", p.Name)
	}
}

// TestExtendsSHA256 pins the hash: a policy without extends hashes its
// bytes alone (as before extends existed), one with extends its bytes
// followed by the parent's SHA256.
func TestExtendsSHA256(t *testing.T) {
	dir := t.TempDir()
	texts := map[string]string{
		"a.toml": base,
		"b.toml": "extends = \"a.toml\"\n",
		"c.toml": "extends = \"b.toml\"\n[limits]\ntimeout = \"1s\"\n",
	}
	writeFiles(t, dir, texts)
	hash := func(parts ...string) string {
		s := sha256.Sum256([]byte(strings.Join(parts, "")))
		return hex.EncodeToString(s[:])
	}
	a, b, c := hash(base), "", ""
	b = hash(texts["b.toml"], a)
	c = hash(texts["c.toml"], b)
	for name, want := range map[string]string{"a.toml": a, "b.toml": b, "c.toml": c} {
		p, err := LoadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if p.SHA256 != want {
			t.Errorf("%s: SHA256 %s, want %s", name, p.SHA256, want)
		}
	}
	if b == a || c == b {
		t.Error("a child's hash equals its parent's")
	}
}

func TestExtendsErrors(t *testing.T) {
	dir := t.TempDir()
	deep := map[string]string{}
	for i := range 10 {
		deep[fmt.Sprintf("d%d.toml", i)] = fmt.Sprintf("extends = \"d%d.toml\"\n", i+1)
	}
	deep["d10.toml"] = base
	writeFiles(t, dir, deep)
	writeFiles(t, dir, map[string]string{
		"loop1.toml":  "# one\nextends = \"loop2.toml\"\n",
		"loop2.toml":  "\n\nextends = \"./loop1.toml\"\n",
		"self.toml":   "extends = \"self.toml\"\n",
		"bad.toml":    strings.Replace(base, `timeout = "10s"`, `timeout = "45h"`, 1),
		"nolock.toml": strings.Replace(base, "landlock = true", "landlock = false", 1),
		"star.toml":   strings.Replace(base, `imports = ["math", "json"]`, `imports = ["*"]`, 1),
	})
	tests := []struct {
		name string
		file string // in dir; "" for doc
		doc  string
		// The error: file (relative to dir), line, key and parts of the message.
		errFile string
		line    int
		key     string
		has     []string
	}{
		{name: "remove absent", doc: "extends = \"default\"\n[allowlist]\nimports_remove = [\"math\", \"socket\"]\n",
			errFile: "c.toml", line: 3, key: "allowlist.imports_remove", has: []string{`"socket" is not in the imports inherited from default`}},
		{name: "add present", doc: "extends = \"default\"\n[sandbox]\nrequire_add = [\"landlock\", \"cgroups\"]\n",
			errFile: "c.toml", line: 3, key: "sandbox.require_add", has: []string{`"cgroups" is already in the require inherited from default`}},
		{name: "add and remove", doc: "extends = \"default\"\n[allowlist]\nimports_add = [\"numpy\"]\nimports_remove = [\"numpy\"]\n",
			errFile: "c.toml", line: 4, key: "allowlist.imports_remove", has: []string{`"numpy" is also in imports_add`}},
		{name: "set and add", doc: "extends = \"default\"\n[allowlist]\nimports = [\"math\"]\nimports_add = [\"json\"]\n",
			errFile: "c.toml", line: 4, key: "allowlist.imports_add", has: []string{"cannot be combined with imports in one file"}},
		{name: "add without extends", doc: strings.Replace(base, "strict_attributes = true", "strict_attributes = true\ndeny_events_add = [\"x\"]", 1),
			errFile: "c.toml", line: 34, key: "allowlist.deny_events_add", has: []string{"needs extends", `extends = "default"`}},
		{name: "bad entry added", doc: "extends = \"default\"\n[allowlist]\nimports_add = [\"numpy\", \"os.path\"]\n",
			errFile: "c.toml", line: 3, key: "allowlist.imports_add", has: []string{`element 2: "os.path" is not a top-level module name`}},
		{name: "entry twice", doc: "extends = \"default\"\n[allowlist]\ndeny_builtins_add = [\"eval\", \"eval\"]\n",
			errFile: "c.toml", line: 3, key: "allowlist.deny_builtins_add", has: []string{`element 2: "eval" is listed twice`}},
		{name: "add type", doc: "extends = \"default\"\n[allowlist]\ndeny_events_remove = \"os.system\"\n",
			errFile: "c.toml", line: 3, key: "allowlist.deny_events_remove", has: []string{"must be an array of strings, not a string"}},
		{name: "star and more", doc: "extends = \"star.toml\"\n[allowlist]\nimports_add = [\"math\"]\n",
			errFile: "c.toml", line: 3, key: "allowlist.imports", has: []string{`"*" allows every module and must be the only entry`}},
		{name: "unknown built-in", doc: "extends = \"lax\"\n",
			errFile: "c.toml", line: 1, key: "extends", has: []string{`"lax" is not a built-in policy`, "datasci, datasci-min, default, permissive, strict, web"}},
		{name: "empty", doc: "\nextends = \"\"\n", errFile: "c.toml", line: 2, key: "extends", has: []string{`"" names no policy`}},
		{name: "not a string", doc: "extends = [\"default\"]\n", errFile: "c.toml", line: 1, key: "extends", has: []string{"must be a string, not an array"}},
		{name: "missing file", doc: "\n\n\nextends = \"nope.toml\"\n[limits]\ntimeout = \"1s\"\n",
			errFile: "c.toml", line: 4, key: "extends", has: []string{"read policy " + filepath.Join(dir, "nope.toml") + ": no such file"}},
		{name: "cycle", file: "loop1.toml", errFile: "loop2.toml", line: 3, key: "extends",
			has: []string{"cycle: " + filepath.Join(dir, "loop1.toml") + " extends " + filepath.Join(dir, "loop2.toml") + " extends " + filepath.Join(dir, "loop1.toml")}},
		{name: "self", file: "self.toml", errFile: "self.toml", line: 1, key: "extends", has: []string{"cycle: "}},
		{name: "too deep", file: "d0.toml", errFile: "d8.toml", line: 1, key: "extends",
			has: []string{"more than 8 policies above this one", "d0.toml extends " + filepath.Join(dir, "d1.toml"), "d8.toml extends " + filepath.Join(dir, "d9.toml")}},
		{name: "parent error", doc: "extends = \"bad.toml\"\n", errFile: "bad.toml", line: 8, key: "limits.timeout", has: []string{"45h exceeds the maximum 24h"}},
		{name: "child value", doc: "extends = \"default\"\n[limits]\nmemory = \"1MiB\"\n", errFile: "c.toml", line: 3, key: "limits.memory", has: []string{"below the minimum 16MiB"}},
		{name: "child contradicts parent", doc: "extends = \"default\"\n[sandbox]\nseccomp = \"none\"\n",
			errFile: "c.toml", line: 3, key: "sandbox.seccomp", has: []string{`"none" contradicts sandbox.require`}},
		{name: "inherited value contradicts child", doc: "# a comment\nextends = \"nolock.toml\"\n[sandbox]\nrequire_add = [\"landlock\"]\n",
			errFile: "c.toml", line: 2, key: "sandbox.landlock",
			has: []string{"false contradicts sandbox.require", "(inherited from " + filepath.Join(dir, "nolock.toml") + ":27)"}},
		{name: "inherited from a built-in", doc: "extends = \"default\"\n[sandbox]\nrequire_add = [\"landlock\"]\nlandlock = false\n",
			errFile: "c.toml", line: 4, key: "sandbox.landlock", has: []string{"false contradicts"}},
		{name: "extends in a table", doc: "[limits]\nextends = \"default\"\n",
			errFile: "c.toml", line: 2, key: "limits.extends", has: []string{"(extends belongs at the top level, above the first [table])"}},
		{name: "unknown key", doc: "extends = \"default\"\n[allowlist]\nimport_add = [\"x\"]\n",
			errFile: "c.toml", line: 3, key: "allowlist.import_add", has: []string{`did you mean "imports_add"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.file != "" {
				_, err = LoadFile(filepath.Join(dir, tt.file))
			} else {
				_, err = Parse(filepath.Join(dir, "c.toml"), []byte(tt.doc))
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v (%T), want *Error", err, err)
			}
			if want := filepath.Join(dir, tt.errFile); e.File != want || e.Line != tt.line || e.Key != tt.key {
				t.Errorf("error at %s:%d key %q, want %s:%d key %q: %v", e.File, e.Line, e.Key, want, tt.line, tt.key, err)
			}
			for _, s := range tt.has {
				if !strings.Contains(e.Msg, s) {
					t.Errorf("message %q does not contain %q", e.Msg, s)
				}
			}
		})
	}
	// Eight policies above one are allowed.
	if _, err := LoadFile(filepath.Join(dir, "d2.toml")); err != nil {
		t.Errorf("a chain of 8 extends: %v", err)
	}
}
