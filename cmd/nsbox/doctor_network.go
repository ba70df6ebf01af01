package main

import (
	"fmt"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// landlockNetABI is the first Landlock ABI with network rules (Linux 6.7).
const landlockNetABI = 4

// networkCheck reports whether network allowlist mode works on this host
// (docs/network.md). It needs nothing a run without network does not:
// the network namespace probe makes the proxy's endpoint as the init
// does, a socket listening on its loopback, so the row follows that
// probe. Landlock's network rules are a further fence where the kernel
// has them. Informational, unless the policy uses the mode: then it
// belongs to its namespaces requirement.
func networkCheck(r hostcheck.Report, pol *policies.Policy) hostcheck.Check {
	c := hostcheck.Check{Name: "network allowlist", MinKernel: "-"}
	if pol.Allowlisted() {
		c.Group = hostcheck.Namespaces
	}
	var ns *hostcheck.Check
	for i := range r.Checks {
		if r.Checks[i].Name == "network namespace" {
			ns = &r.Checks[i]
		}
	}
	switch {
	case ns == nil:
		c.Detail = "the network namespace was not probed"
		return c
	case !ns.OK:
		c.Detail = "needs the network namespace, which failed: " + ns.Detail
		c.Hint = ns.Hint
		return c
	}
	c.OK = true
	c.Detail = "works: the proxy's socket listens on " + spec.ProxyAddr + " in a new network namespace"
	abi, err := llsys.LandlockGetABIVersion()
	switch {
	case err == nil && abi >= landlockNetABI:
		c.Detail += fmt.Sprintf("; Landlock network rules (ABI %d) keep TCP to its port", abi)
	case err == nil:
		c.Detail += fmt.Sprintf("; no Landlock network rules (ABI %d, they need %d, Linux 6.7): the namespace, the seccomp filter and the proxy hold without them", abi, landlockNetABI)
	default:
		c.Detail += "; no Landlock network rules (no Landlock): the namespace, the seccomp filter and the proxy hold without them"
	}
	if pol.Allowlisted() {
		c.Detail += fmt.Sprintf("; policy %s allows %d host(s)", pol.Name, len(pol.Network.Allow))
	}
	return c
}
