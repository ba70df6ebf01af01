package planner

import (
	"fmt"
	"slices"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/seccomp"
)

// isBuiltinFilter is seccomp.IsBuiltin; a test replaces it to see noProc
// refuse a built-in filter with no +noproc variant.
var isBuiltinFilter = seccomp.IsBuiltin

// noProc returns the filter a run loads: filter itself, or, when the
// policy denies every one of pyrunner.ProcessEvents and filter is a built-in one
// that allows new processes, its variant that refuses them in the kernel
// (seccomp.NoProcSuffix). A profile of the user's own (a path) is left as
// it is: nsbox does not rewrite it. Fail closed: a built-in filter that
// allows processes and has no such variant is an error, which the caller
// puts under the policy key sandbox.seccomp.
func noProc(p *policies.Policy, filter string) (string, error) {
	if !isBuiltinFilter(filter) || seccomp.RefusesProcesses(filter) {
		return filter, nil
	}
	for _, e := range pyrunner.ProcessEvents {
		if !slices.Contains(p.Allowlist.DenyEvents, e) {
			return filter, nil
		}
	}
	name := filter + seccomp.NoProcSuffix
	if !isBuiltinFilter(name) {
		return "", fmt.Errorf("allowlist.deny_events denies every process-creation event, and the built-in filter %q allows new processes with no %s variant to refuse them in the kernel", filter, seccomp.NoProcSuffix)
	}
	return name, nil
}
