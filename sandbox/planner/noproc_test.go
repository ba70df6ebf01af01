package planner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/seccomp"
)

// TestProcessEventsInDenyLists: the shipped policies that run untrusted
// code deny every process-creation event (pyrunner's deny lists are built
// from pyrunner.ProcessEvents; this catches a policy file edited away
// from them), so their plans load a filter that refuses new processes.
func TestProcessEventsInDenyLists(t *testing.T) {
	for _, name := range []string{"strict", "default", "datasci", "datasci-min", "web"} {
		p, err := policies.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pyrunner.ProcessEvents {
			if !slices.Contains(p.Allowlist.DenyEvents, e) {
				t.Errorf("policy %s: allowlist.deny_events lacks %q", name, e)
			}
		}
		pl, err := Make(p, Flags{}, fullHost)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !seccomp.RefusesProcesses(pl.Seccomp) {
			t.Errorf("policy %s: filter %q allows new processes", name, pl.Seccomp)
		}
	}
}

// TestShippedPoliciesNoProc: every shipped policy that denies every
// process-creation event loads a filter that refuses new processes.
func TestShippedPoliciesNoProc(t *testing.T) {
	for _, name := range policies.BuiltinNames() {
		p, err := policies.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := Make(p, Flags{}, fullHost)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		denies := !slices.ContainsFunc(pyrunner.ProcessEvents, func(e string) bool { return !slices.Contains(p.Allowlist.DenyEvents, e) })
		if denies && !seccomp.RefusesProcesses(pl.Seccomp) {
			t.Errorf("%s denies every process-creation event, its filter %q does not refuse processes", name, pl.Seccomp)
		}
		if !denies && strings.HasSuffix(pl.Seccomp, seccomp.NoProcSuffix) {
			t.Errorf("%s allows a process-creation event, its filter is %q", name, pl.Seccomp)
		}
	}
}

// TestNoProcFailsClosed: a built-in filter that allows processes and has
// no +noproc variant refuses the run, naming the policy keys.
func TestNoProcFailsClosed(t *testing.T) {
	defer func(f func(string) bool) { isBuiltinFilter = f }(isBuiltinFilter)
	isBuiltinFilter = func(name string) bool {
		return seccomp.IsBuiltin(name) && !strings.HasSuffix(name, seccomp.NoProcSuffix)
	}
	p, err := policies.Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Make(p, Flags{}, fullHost)
	var se *result.SandboxError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "sandbox.seccomp") || !strings.Contains(se.Message, "allowlist.deny_events") || !strings.Contains(se.Message, `"default"`) {
		t.Fatalf("Make = %v, want a refusal naming sandbox.seccomp and allowlist.deny_events", err)
	}
	if pl.Seccomp != "" {
		t.Errorf("refused plan has filter %q", pl.Seccomp)
	}
}
