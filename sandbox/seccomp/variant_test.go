package seccomp

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestBuiltins: each built-in profile and each of its variants, and
// nothing else, is a built-in filter; variants do not stack.
func TestBuiltins(t *testing.T) {
	want := []string{"default", "default+loopback", "default+loopback+noproc", "default+noproc", "default+proxy", "default+proxy+noproc",
		"strict", "strict+loopback", "strict+proxy"}
	if got := Builtins(); !slices.Equal(got, want) {
		t.Fatalf("Builtins() = %v, want %v", got, want)
	}
	for _, name := range []string{"", "none", "+loopback", "+proxy", "default+loopback+loopback", "default+proxy+loopback",
		"default+loopback+proxy", "default+proxy+proxy", "/etc/p.json+loopback", "/etc/p.json+proxy", "missing+proxy", "default+udp",
		"+noproc", "strict+noproc", "strict+proxy+noproc", "default+noproc+noproc", "default+noproc+proxy", "/etc/p.json+noproc"} {
		if IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) = true", name)
		}
		if _, err := Load(name); err == nil {
			t.Errorf("Load(%q): no error", name)
		}
	}
	for _, name := range []string{"default+proxy+loopback", "default+loopback+proxy", "/etc/p.json+proxy", "missing+proxy", "default"} {
		if b, s, ok := variantOf(name); ok {
			t.Errorf("variantOf(%q) = %q, %q: ok", name, b, s)
		}
	}
	if b, s, ok := variantOf("strict+proxy"); !ok || b != "strict" || s != ProxySuffix {
		t.Errorf(`variantOf("strict+proxy") = %q, %q, %v`, b, s, ok)
	}
}

// TestWithVariant: a variant is the profile plus its socket rules, under
// the variant's name; the profile itself is unchanged, and a second
// variant, the same or another, is refused.
func TestWithVariant(t *testing.T) {
	for _, suffix := range []string{LoopbackSuffix, ProxySuffix} {
		t.Run(suffix, func(t *testing.T) {
			p := mustLoad(t, "default")
			before := slices.Clone(p.plan)
			q, err := p.WithVariant(suffix)
			if err != nil {
				t.Fatal(err)
			}
			if q.Name != "default"+suffix || q.SHA256 != p.SHA256 {
				t.Errorf("variant %q (sha %s), want default%s with the profile's sha %s", q.Name, q.SHA256, suffix, p.SHA256)
			}
			if len(q.plan) <= len(p.plan) {
				t.Errorf("variant has %d planned rules, the profile %d: nothing added", len(q.plan), len(p.plan))
			}
			if !slices.EqualFunc(p.plan, before, func(a, b rule) bool {
				return a.syscall == b.syscall && a.act == b.act && slices.Equal(a.conds, b.conds)
			}) {
				t.Error("WithVariant changed the profile it was called on")
			}
			for _, again := range []string{LoopbackSuffix, ProxySuffix} {
				if _, err := q.WithVariant(again); err == nil || !strings.Contains(err.Error(), "do not stack") {
					t.Errorf("%s then %s: %v, want an error", suffix, again, err)
				}
			}
			loaded, err := Load("default" + suffix)
			if err != nil || len(loaded.plan) != len(q.plan) {
				t.Errorf(`Load("default%s"): %v, %d rules; want %d`, suffix, err, len(loaded.plan), len(q.plan))
			}
		})
	}
	if _, err := mustLoad(t, "default").WithVariant("+udp"); err == nil || !strings.Contains(err.Error(), `no variant "+udp"`) {
		t.Errorf("unknown variant: %v, want an error", err)
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

// TestRefusesIPSockets backs RefusesIPSockets for any arguments: under a
// built-in profile no rule that allows socket(2) can match AF_INET or
// AF_INET6 (compared as the rules compare them, on the low 32 bits or
// all 64), and the default action is an errno; each variant has such a
// rule.
func TestRefusesIPSockets(t *testing.T) {
	families := []cond{
		{index: 0, op: specs.OpMaskedEqual, value: 0xffffffff, datum: 2},
		{index: 0, op: specs.OpMaskedEqual, value: 0xffffffff, datum: 10},
	}
	for _, name := range Builtins() {
		p := mustLoad(t, name)
		allowsIP := false
		for _, r := range p.plan {
			if r.syscall != "socket" || r.act.kind != specs.ActAllow {
				continue
			}
			for _, f := range families {
				if overlap(r, rule{conds: []cond{f}}) {
					allowsIP = true
				}
			}
		}
		if p.defaultAct.kind != specs.ActErrno {
			allowsIP = true
		}
		if got := RefusesIPSockets(name); got == allowsIP {
			t.Errorf("RefusesIPSockets(%q) = %v, but a rule allowing AF_INET or AF_INET6: %v", name, got, allowsIP)
		}
	}
	for _, name := range []string{"none", "/etc/nsbox/profile.json", "default+proxy+loopback", ""} {
		if RefusesIPSockets(name) {
			t.Errorf("RefusesIPSockets(%q) = true: a filter nsbox did not analyse must not count", name)
		}
	}
}
