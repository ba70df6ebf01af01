package hostcheck

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The requirements a policy can name. Each is met when every Check of
// its Group is OK.
const (
	Namespaces = "namespaces" // user, mount, PID, network, IPC, UTS and cgroup namespaces, and the mount API
	Cgroups    = "cgroups"    // a usable hierarchy with the memory, pids and cpu controllers (and freezer on v1); rootless, a v2 subtree delegated to the user
	Seccomp    = "seccomp"    // seccomp filter mode
	Landlock   = "landlock"   // Landlock, any ABI
	// MemfdNoexec: no file the program makes in memory can be executed;
	// nsbox's mechanism is the built-in seccomp profiles' refusal of
	// memfd_create, so the host needs seccomp filter mode (the policy
	// needs a built-in profile, which policy validation checks).
	MemfdNoexec = "memfd_noexec"
	// BoundedWorkspace: a tmpfs bounded in bytes and inodes can be made
	// for /workspace; a run also refuses a --workspace directory that
	// nothing bounds (sandbox/supervisor).
	BoundedWorkspace = "bounded_workspace"
)

var requirements = []string{Namespaces, Cgroups, Seccomp, Landlock, MemfdNoexec, BoundedWorkspace}

// Requirements returns the known requirement names, in check order.
func Requirements() []string { return slices.Clone(requirements) }

// Check is one feature of the host and what was found.
type Check struct {
	Name      string `json:"name"`       // feature, e.g. "user namespace", "seccomp"
	Group     string `json:"group"`      // requirement it belongs to; "" when informational
	OK        bool   `json:"ok"`         // the feature works as nsbox uses it
	Detail    string `json:"detail"`     // what was found: "v1 (hybrid)", "ABI 7", an errno text
	MinKernel string `json:"min_kernel"` // first Linux version with the feature, e.g. "5.12"
	Hint      string `json:"hint"`       // how to get the feature; empty when OK
}

// Report is the outcome of Probe.
type Report struct {
	Kernel string   `json:"kernel"` // uname release, e.g. "6.18.44"
	Checks []Check  `json:"checks"` // in a fixed order: namespaces, mount API, cgroups, seccomp, landlock, informational
	Notes  []string `json:"notes"`  // protections that work but weaker than asked (e.g. cgroup v1 without swap accounting); may be empty
}

// Missing returns the requirements among reqs that this report cannot
// meet, in the order given: a requirement is met only when it has at
// least one check and all of its checks are OK (so it fails closed if a
// check was left out). Unknown names are returned as missing too; use
// ValidateRequirements to tell them apart.
func (r Report) Missing(reqs []string) []string {
	var missing []string
	for _, req := range reqs {
		seen, ok := false, true
		for _, c := range r.Checks {
			if c.Group == req {
				seen = true
				ok = ok && c.OK
			}
		}
		if !seen || !ok || !slices.Contains(requirements, req) {
			missing = append(missing, req)
		}
	}
	return missing
}

// Failed returns the checks that are not OK, in report order.
func (r Report) Failed() []Check {
	var failed []Check
	for _, c := range r.Checks {
		if !c.OK {
			failed = append(failed, c)
		}
	}
	return failed
}

// ValidateRequirements returns an error naming every unknown requirement
// in reqs, or nil.
func ValidateRequirements(reqs []string) error {
	var unknown []string
	for _, req := range reqs {
		if !slices.Contains(requirements, req) {
			unknown = append(unknown, fmt.Sprintf("%q", req))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown requirement %s (known: %s)", strings.Join(unknown, ", "), strings.Join(requirements, ", "))
	}
	return nil
}

// kernelRelease returns the running kernel's release string, or a
// placeholder naming the error: the report is still worth printing.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Sprintf("unknown (uname: %v)", err)
	}
	return unix.ByteSliceToString(u.Release[:])
}
