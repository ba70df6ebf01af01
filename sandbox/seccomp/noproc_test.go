package seccomp

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestWithoutProcesses: the +noproc variant replaces the profile's rules
// on the process syscalls and keeps every other one; the profile itself
// is unchanged; it comes last and only once.
func TestWithoutProcesses(t *testing.T) {
	for _, from := range []string{"default", "default" + LoopbackSuffix, "default" + ProxySuffix} {
		t.Run(from, func(t *testing.T) {
			p := mustLoad(t, from)
			before := slices.Clone(p.plan)
			q, err := p.WithoutProcesses()
			if err != nil {
				t.Fatal(err)
			}
			if q.Name != from+NoProcSuffix || q.SHA256 != p.SHA256 {
				t.Errorf("variant %q (sha %s), want %s%s with the profile's sha %s", q.Name, q.SHA256, from, NoProcSuffix, p.SHA256)
			}
			same := func(a, b rule) bool {
				return a.syscall == b.syscall && a.act == b.act && slices.Equal(a.conds, b.conds)
			}
			if !slices.EqualFunc(p.plan, before, same) {
				t.Error("WithoutProcesses changed the profile it was called on")
			}
			notProc := func(rs []rule) []rule {
				return slices.DeleteFunc(slices.Clone(rs), func(r rule) bool { return slices.Contains(noProcSyscalls, r.syscall) })
			}
			if !slices.EqualFunc(notProc(p.plan), notProc(q.plan), same) {
				t.Error("WithoutProcesses changed rules on other syscalls")
			}
			if _, err := q.WithoutProcesses(); err == nil || !strings.Contains(err.Error(), "already") {
				t.Errorf("twice: %v, want an error", err)
			}
			if _, err := q.WithVariant(ProxySuffix); err == nil || !strings.Contains(err.Error(), "comes last") {
				t.Errorf("a socket variant after %s: %v, want an error", NoProcSuffix, err)
			}
			loaded, err := Load(from + NoProcSuffix)
			if err != nil || !slices.EqualFunc(loaded.plan, q.plan, same) {
				t.Errorf("Load(%q): %v, or a plan other than WithoutProcesses'", from+NoProcSuffix, err)
			}
		})
	}
}

// TestRefusesProcesses backs RefusesProcesses on the plans: a built-in
// filter refuses new processes when no rule allows fork, vfork or clone3,
// every rule that allows clone requires CLONE_THREAD, and the default
// action is an errno. A +noproc variant exists exactly for the profiles
// that do not.
func TestRefusesProcesses(t *testing.T) {
	noThread := rule{conds: []cond{{index: 0, op: specs.OpMaskedEqual, value: 0x10000, datum: 0}}}
	for _, name := range Builtins() {
		p := mustLoad(t, name)
		allows := p.defaultAct.kind != specs.ActErrno
		for _, r := range p.plan {
			if r.act.kind != specs.ActErrno && (r.syscall == "fork" || r.syscall == "vfork" || r.syscall == "clone3" ||
				r.syscall == "clone" && overlap(r, noThread)) {
				allows = true
			}
		}
		if got := RefusesProcesses(name); got == allows {
			t.Errorf("RefusesProcesses(%q) = %v, but a rule allowing a new process: %v", name, got, allows)
		}
		if _, hasVariant := noProcOf(name + NoProcSuffix); hasVariant != allows {
			t.Errorf("%s allows processes: %v; has a %s variant: %v", name, allows, NoProcSuffix, hasVariant)
		}
	}
	for _, name := range []string{"none", "/etc/nsbox/profile.json", "strict+noproc", ""} {
		if RefusesProcesses(name) {
			t.Errorf("RefusesProcesses(%q) = true: a filter nsbox did not analyse must not count", name)
		}
	}
}
