package seccomp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// LoopbackSuffix ends the name of a built-in profile's loopback variant,
// "default+loopback": the profile with WithLoopbackSockets, which a policy
// selects with sandbox.loopback_sockets. The variants are compiled at
// build time like the profiles themselves (seccomp-profiles/gen).
const LoopbackSuffix = "+loopback"

// loopbackRules are what WithLoopbackSockets adds, in the profile format,
// checked by the same parser as a profile's rules. Only socket(2) needs
// them: every other socket call works on a socket that exists.
const loopbackRules = `[
	{
		"comment": "sandbox.loopback_sockets: AF_INET (2). The network namespace has only loopback, so these sockets reach nothing outside the sandbox; their buffers count against the run's memory limit (cgroup v2 memory.max; v1 memory.kmem.tcp.limit_in_bytes).",
		"names": ["socket"],
		"action": "SCMP_ACT_ALLOW",
		"args": [{"index": 0, "value": 4294967295, "valueTwo": 2, "op": "SCMP_CMP_MASKED_EQ"}]
	},
	{
		"comment": "sandbox.loopback_sockets: AF_INET6 (10).",
		"names": ["socket"],
		"action": "SCMP_ACT_ALLOW",
		"args": [{"index": 0, "value": 4294967295, "valueTwo": 10, "op": "SCMP_CMP_MASKED_EQ"}]
	}
]`

// WithLoopbackSockets returns a copy of p that also allows socket(2) with
// AF_INET and AF_INET6, named p.Name+LoopbackSuffix; p is unchanged. The
// added rules go through the same checks as the profile's own, so a
// profile whose socket rules they would contradict is an error. Address
// families the profile refuses otherwise (netlink, packet, ...) stay
// refused.
func (p *Profile) WithLoopbackSockets() (*Profile, error) {
	if strings.HasSuffix(p.Name, LoopbackSuffix) {
		return nil, fmt.Errorf("seccomp profile %s: loopback sockets added twice", p.Name)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(loopbackRules)))
	dec.DisallowUnknownFields()
	var jrs []jsonRule
	if err := dec.Decode(&jrs); err != nil {
		// A constant of this file: a failure is a bug here.
		panic(fmt.Sprintf("seccomp: bug: loopback rules: %v", err))
	}
	rules := slices.Clone(p.rules)
	for i, jr := range jrs {
		rs, err := parseRule(jr, fmt.Sprintf("loopback rules[%d]", i), 0, []byte(loopbackRules))
		if err != nil {
			return nil, &ProfileError{Source: p.Source + " with " + LoopbackSuffix, Field: err.field, Err: err.err}
		}
		rules = append(rules, rs...)
	}
	q := *p
	q.Name, q.rules = p.Name+LoopbackSuffix, rules
	var err error
	if q.plan, err = plan(rules); err != nil {
		return nil, &ProfileError{Source: p.Source + " with " + LoopbackSuffix, Err: err}
	}
	return &q, nil
}

// loopbackVariant reports whether name is a built-in profile's loopback
// variant, and of which profile.
func loopbackVariant(name string) (base string, ok bool) {
	base, ok = strings.CutSuffix(name, LoopbackSuffix)
	return base, ok && slices.Contains(seccompprofiles.Names(), base)
}

// Builtins lists the built-in filters a policy can select, sorted: each
// built-in profile and its loopback variant. seccomp-profiles/gen
// compiles a golden for each.
func Builtins() []string {
	var names []string
	for _, n := range seccompprofiles.Names() {
		names = append(names, n, n+LoopbackSuffix)
	}
	slices.Sort(names)
	return names
}

// IsBuiltin reports whether name is one of Builtins.
func IsBuiltin(name string) bool { return slices.Contains(Builtins(), name) }

// RefusesMemfd reports whether the filter a run loads for profile (a name
// from Builtins, an absolute path, or "none") is known to refuse
// memfd_create whatever its arguments. Every built-in filter does
// (TestBuiltinsRefuseMemfd proves it on the compiled goldens). A profile of
// the user's own is not analysed: false, so a policy that requires the
// protection fails closed with one.
func RefusesMemfd(profile string) bool { return IsBuiltin(profile) }
