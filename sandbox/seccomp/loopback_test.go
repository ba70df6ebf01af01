package seccomp

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestBuiltins: each built-in profile and its loopback variant, and
// nothing else, is a built-in filter.
func TestBuiltins(t *testing.T) {
	want := []string{"default", "default+loopback", "strict", "strict+loopback"}
	if got := Builtins(); !slices.Equal(got, want) {
		t.Fatalf("Builtins() = %v, want %v", got, want)
	}
	for _, name := range []string{"", "none", "+loopback", "default+loopback+loopback", "/etc/p.json+loopback", "missing+loopback"} {
		if IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) = true", name)
		}
		if _, ok := loopbackVariant(name); ok && name != "default+loopback+loopback" {
			t.Errorf("loopbackVariant(%q): ok", name)
		}
	}
}

// TestWithLoopbackSockets: the variant is the profile plus socket(AF_INET)
// and socket(AF_INET6), under the variant's name; the profile itself is
// unchanged, and adding the rules twice is refused.
func TestWithLoopbackSockets(t *testing.T) {
	p := mustLoad(t, "default")
	before := slices.Clone(p.plan)
	q, err := p.WithLoopbackSockets()
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "default+loopback" || q.SHA256 != p.SHA256 {
		t.Errorf("variant %q (sha %s), want default+loopback with the profile's sha %s", q.Name, q.SHA256, p.SHA256)
	}
	if !slices.EqualFunc(p.plan, before, func(a, b rule) bool {
		return a.syscall == b.syscall && a.act == b.act && slices.Equal(a.conds, b.conds)
	}) {
		t.Error("WithLoopbackSockets changed the profile it was called on")
	}
	if _, err := q.WithLoopbackSockets(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("loopback added twice: %v, want an error", err)
	}
	loaded, err := Load("default+loopback")
	if err != nil || len(loaded.plan) != len(q.plan) {
		t.Errorf(`Load("default+loopback"): %v, %d rules; want %d`, err, len(loaded.plan), len(q.plan))
	}
}

// TestBuiltinsRefuseMemfd backs RefusesMemfd for any arguments, not only
// the flags TestFilterVerdicts tries: no rule of a built-in filter allows
// memfd_create, and what a call matches (a rule, else the default) is an
// errno.
func TestBuiltinsRefuseMemfd(t *testing.T) {
	for _, name := range Builtins() {
		p := mustLoad(t, name)
		if !RefusesMemfd(name) {
			t.Errorf("RefusesMemfd(%q) = false", name)
		}
		if p.defaultAct.kind != specs.ActErrno {
			t.Errorf("%s: default action %s, want an errno", name, p.defaultAct)
		}
		for _, r := range p.plan {
			if r.syscall == "memfd_create" && r.act.kind != specs.ActErrno {
				t.Errorf("%s: rule %s (line %d) gives memfd_create %s", name, r.where, r.line, r.act)
			}
		}
	}
	for _, name := range []string{"none", "/etc/nsbox/profile.json"} {
		if RefusesMemfd(name) {
			t.Errorf("RefusesMemfd(%q) = true: a profile nsbox did not analyse must not count", name)
		}
	}
}
