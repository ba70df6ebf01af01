package plan

import (
	"fmt"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/seccomp"
)

// Host is what this host can enforce, as Make needs it: read by ReadHost
// before every run, written by hand in tests.
type Host struct {
	// Unmet is hostcheck.Require's answer for the policy's
	// sandbox.require: nil when the host can enforce every requirement.
	Unmet error `json:"-"`

	Seccomp  Feature  `json:"seccomp"`
	Landlock Landlock `json:"landlock"`
	Cgroup   Feature  `json:"cgroup"`
}

// Feature says whether the host has a protection, and why not.
type Feature struct {
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"` // when !OK: what is missing, with the fix
}

// Landlock is the kernel's Landlock ABI; 0 and why when it has none.
type Landlock struct {
	ABI int    `json:"abi"`
	Why string `json:"why,omitempty"`
}

// ReadHost reads what this host can enforce, cheaply enough to run before
// every run: it starts no process and changes nothing (hostcheck.Require
// for the requirements, seccomp.Supported, the Landlock ABI and
// cgroup.Detect, which in rootless mode looks for a delegated cgroup v2
// subtree). reqs are the policy's sandbox.require.
func ReadHost(reqs []string) Host {
	var h Host
	h.Unmet = hostcheck.Require(reqs)
	h.Seccomp.OK, h.Seccomp.Why = seccomp.Supported()
	if h.Seccomp.OK {
		h.Seccomp.Why = ""
	}
	if abi, err := llsys.LandlockGetABIVersion(); err == nil && abi > 0 {
		h.Landlock.ABI = abi
	} else {
		h.Landlock.Why = fmt.Sprint(err)
	}
	switch info, err := cgroup.Detect(); {
	case err != nil:
		h.Cgroup.Why = err.Error()
	case info.Delegation != nil && !info.Delegation.Usable:
		// Rootless: cgroups only in a subtree delegated to the user.
		h.Cgroup.Why = fmt.Sprintf("rootless: no cgroup v2 subtree delegated to this user that nsbox can use: %s; to fix: %s",
			info.Delegation.Why, info.Hint)
	case len(info.Missing) > 0:
		h.Cgroup.Why = fmt.Sprintf("controllers %v missing: %s", info.Missing, info.Hint)
	default:
		h.Cgroup.OK = true
	}
	return h
}
