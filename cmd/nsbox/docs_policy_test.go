package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/policies"
)

// policyKeyModel is what a policy file may say, from the key table: each
// key by section, and the list keys' _add and _remove forms.
type policyKeyModel struct {
	sections map[string]bool // "limits", ...
	keys     map[string]bool // "limits.timeout", "allowlist.imports_add", "extends", ...
}

func newPolicyKeyModel() *policyKeyModel {
	m := &policyKeyModel{sections: map[string]bool{"env": true}, keys: map[string]bool{}}
	for _, k := range policies.Keys() {
		m.keys[k.Name] = true
		if sec := k.Section(); sec != "" {
			m.sections[sec] = true
		}
		if k.List() {
			m.keys[k.Name+"_add"], m.keys[k.Name+"_remove"] = true, true
		}
	}
	return m
}

// known reports whether key (dotted, or a leaf under section) is one.
func (m *policyKeyModel) known(section, leaf string) bool {
	if section == "" {
		return m.keys[leaf]
	}
	return section == "env" || m.keys[section+"."+leaf]
}

// notPolicyKeys are dotted names the docs use that look like policy keys
// but are fields of another object, by the page that describes them.
var notPolicyKeys = map[string]string{
	"sandbox.cgroup":      "the result (docs/result-schema.md)",
	"sandbox.rootless":    "the result (docs/result-schema.md)",
	"sandbox.host_ids":    "the result (docs/result-schema.md)",
	"limits.timeout_ms":   "the result (docs/result-schema.md)",
	"limits.cpu_time_ms":  "the result (docs/result-schema.md)",
	"limits.memory_bytes": "the result (docs/result-schema.md)",
	"limits.output_bytes": "the result (docs/result-schema.md)",
	"python.path":         "a root's header (docs/roots.md)",
	"python.version":      "a root's header (docs/roots.md)",
	"python.host":         "a root's header (docs/roots.md)",
}

var (
	// keySpanRE is a code span naming a policy key: `limits.timeout`,
	// `allowlist.imports_add`, `sandbox.seccomp = "strict"`.
	keySpanRE = regexp.MustCompile(`^([a-z]+)\.([a-z_]+)\b`)
	// tableRE and assignRE read the TOML of a fenced block.
	tableRE  = regexp.MustCompile(`^\s*\[([a-z_]+)\]\s*(#.*)?$`)
	assignRE = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=`)
)

// TestDocsPolicyKeys: every policy key the docs name exists in the key
// table (policies.Keys), in code spans (`limits.timeout`) and in the TOML
// of code blocks (a key under a [section] header). That every key of the
// table is documented is docs/policies.md's job: it is generated from the
// table, and TestReferencePageFresh fails when it is stale.
func TestDocsPolicyKeys(t *testing.T) {
	m := newPolicyKeyModel()
	checked := 0
	for _, f := range markdownFiles(t) {
		for _, s := range f.spans {
			sm := keySpanRE.FindStringSubmatch(s.text)
			if sm == nil || !m.sections[sm[1]] || sm[1] == "env" || notPolicyKeys[sm[0]] != "" {
				continue
			}
			checked++
			if !m.known(sm[1], sm[2]) {
				t.Errorf("%s:%d: names the policy key %s.%s, which the key table does not have", f.path, s.line, sm[1], sm[2])
			}
		}
		for _, b := range f.blocks {
			section, toml := "", false
			for _, l := range b.lines {
				if tm := tableRE.FindStringSubmatch(l.text); tm != nil {
					section, toml = tm[1], m.sections[tm[1]]
					if !toml {
						t.Errorf("%s:%d: a policy block with the table [%s], which the key table does not have", f.path, l.line, tm[1])
					}
					continue
				}
				am := assignRE.FindStringSubmatch(l.text)
				if am == nil || !toml && !(section == "" && (am[1] == "extends" || am[1] == "description")) {
					continue
				}
				checked++
				if !m.known(section, am[1]) {
					where := "at the top level"
					if section != "" {
						where = "in [" + section + "]"
					}
					t.Errorf("%s:%d: sets the policy key %s %s, which the key table does not have", f.path, l.line, strings.TrimSpace(am[1]), where)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no policy key found in the docs: the check reads nothing")
	}
}
