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
// "default+loopback": the profile plus socket(2) with AF_INET and
// AF_INET6, any type, which a policy selects with
// sandbox.loopback_sockets.
const LoopbackSuffix = "+loopback"

// ProxySuffix ends the name of a built-in profile's proxy variant,
// "default+proxy": the profile plus TCP sockets only, socket(2) with
// AF_INET or AF_INET6, SOCK_STREAM (with any of SOCK_NONBLOCK and
// SOCK_CLOEXEC) and protocol 0 or IPPROTO_TCP, which is what a program
// needs to reach the network allowlist mode's proxy on its loopback. UDP,
// raw and SCTP or MPTCP sockets stay refused, like every other family.
const ProxySuffix = "+proxy"

// A variant is rules in the profile format that a built-in profile can
// have added, under the name profile+suffix. Variants are compiled at
// build time like the profiles themselves (seccomp-profiles/gen), and do
// not stack: a profile has at most one.
type variant struct {
	suffix string
	// rules are checked by the same parser as a profile's rules. Only
	// socket(2) needs them: every other socket call works on a socket
	// that exists.
	rules string
}

// variants are the built-in profiles' variants, in the order Builtins
// lists them after the profile.
var variants = []variant{
	{LoopbackSuffix, `[
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
]`},
	{ProxySuffix, `[
	{
		"comment": "network allowlist mode: TCP sockets, to reach the proxy on loopback (the only interface). socket(AF_INET (2), SOCK_STREAM (1), 0): the family and protocol compared on their low 32 bits, the type on its low 4 (SOCK_TYPE_MASK) so that SOCK_NONBLOCK and SOCK_CLOEXEC pass. All three must hold. No SOCK_DGRAM (no UDP, so no resolver of its own), no SOCK_RAW, no SOCK_SEQPACKET; their buffers count against the run's memory limit as the loopback variant's do.",
		"names": ["socket"],
		"action": "SCMP_ACT_ALLOW",
		"args": [
			{"index": 0, "value": 4294967295, "valueTwo": 2, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 1, "value": 15, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 2, "value": 4294967295, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
		]
	},
	{
		"comment": "The same with IPPROTO_TCP (6) named. Other stream protocols (IPPROTO_SCTP 132, IPPROTO_MPTCP 262) are more kernel code the proxy does not need.",
		"names": ["socket"],
		"action": "SCMP_ACT_ALLOW",
		"args": [
			{"index": 0, "value": 4294967295, "valueTwo": 2, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 1, "value": 15, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 2, "value": 4294967295, "valueTwo": 6, "op": "SCMP_CMP_MASKED_EQ"}
		]
	},
	{
		"comment": "AF_INET6 (10), SOCK_STREAM, 0.",
		"names": ["socket"],
		"action": "SCMP_ACT_ALLOW",
		"args": [
			{"index": 0, "value": 4294967295, "valueTwo": 10, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 1, "value": 15, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 2, "value": 4294967295, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
		]
	},
	{
		"comment": "AF_INET6 (10), SOCK_STREAM, IPPROTO_TCP (6).",
		"names": ["socket"],
		"action": "SCMP_ACT_ALLOW",
		"args": [
			{"index": 0, "value": 4294967295, "valueTwo": 10, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 1, "value": 15, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"},
			{"index": 2, "value": 4294967295, "valueTwo": 6, "op": "SCMP_CMP_MASKED_EQ"}
		]
	}
]`},
}

// WithVariant returns a copy of p with the rules of the variant named by
// suffix (LoopbackSuffix, ProxySuffix) added, named p.Name+suffix; p is
// unchanged. The added rules go through the same checks as the profile's
// own, so a profile whose socket rules they would contradict is an error.
// What the variant does not allow stays as the profile says: the other
// address families (netlink, packet, ...) stay refused. A profile that is
// already a variant gets no second one.
func (p *Profile) WithVariant(suffix string) (*Profile, error) {
	i := slices.IndexFunc(variants, func(v variant) bool { return v.suffix == suffix })
	if i < 0 {
		return nil, fmt.Errorf("seccomp profile %s: no variant %q (one of %s)", p.Name, suffix, strings.Join(variantSuffixes(), ", "))
	}
	if strings.HasSuffix(p.Name, NoProcSuffix) {
		return nil, fmt.Errorf("seccomp profile %s: cannot add %s after %s: %s comes last", p.Name, suffix, NoProcSuffix, NoProcSuffix)
	}
	for _, v := range variants {
		if strings.HasSuffix(p.Name, v.suffix) {
			return nil, fmt.Errorf("seccomp profile %s: already the %s variant, cannot add %s: variants do not stack (a variant added twice either)", p.Name, v.suffix, suffix)
		}
	}
	return p.derive(suffix, variants[i].rules, slices.Clone(p.rules))
}

// derive returns a copy of p named p.Name+suffix whose rules are base (p's
// own, or what is left of them) followed by the rules in rulesJSON, a
// constant in the profile format checked by the same parser as a
// profile's rules; p is unchanged. A profile the result does not plan is
// an error.
func (p *Profile) derive(suffix, rulesJSON string, base []rule) (*Profile, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(rulesJSON)))
	dec.DisallowUnknownFields()
	var jrs []jsonRule
	if err := dec.Decode(&jrs); err != nil {
		// A constant of this package: a failure is a bug here.
		panic(fmt.Sprintf("seccomp: bug: %s rules: %v", suffix, err))
	}
	src := p.Source + " with " + suffix
	rules := base
	for i, jr := range jrs {
		rs, err := parseRule(jr, fmt.Sprintf("%s rules[%d]", suffix, i), 0, []byte(rulesJSON))
		if err != nil {
			return nil, &ProfileError{Source: src, Field: err.field, Err: err.err}
		}
		rules = append(rules, rs...)
	}
	q := *p
	q.Name, q.rules = p.Name+suffix, rules
	var err error
	if q.plan, err = plan(rules); err != nil {
		return nil, &ProfileError{Source: src, Err: err}
	}
	return &q, nil
}

// variantSuffixes lists the variants' suffixes, in table order.
func variantSuffixes() []string {
	var out []string
	for _, v := range variants {
		out = append(out, v.suffix)
	}
	return out
}

// variantOf reports whether name is a built-in profile's variant, and
// which profile and suffix.
func variantOf(name string) (base, suffix string, ok bool) {
	for _, v := range variants {
		if b, cut := strings.CutSuffix(name, v.suffix); cut && slices.Contains(seccompprofiles.Names(), b) {
			return b, v.suffix, true
		}
	}
	return "", "", false
}

// Builtins lists the built-in filters a policy can select, sorted: each
// built-in profile and each of its variants, and for a profile that
// allows processes each of those with NoProcSuffix. seccomp-profiles/gen
// compiles a golden for each.
func Builtins() []string {
	var names []string
	for _, n := range seccompprofiles.Names() {
		these := []string{n}
		for _, v := range variants {
			these = append(these, n+v.suffix)
		}
		names = append(names, these...)
		if slices.Contains(noProcProfiles, n) {
			for _, t := range these {
				names = append(names, t+NoProcSuffix)
			}
		}
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

// RefusesIPSockets reports whether the filter a run loads for profile (a
// name from Builtins, an absolute path, or "none") is known to refuse
// every AF_INET and AF_INET6 socket, whatever the other arguments: a
// built-in profile does (and its NoProcSuffix variant), its socket
// variants do not (each allows some), and
// neither does a profile of the user's own, which is not analysed, or
// "none". On cgroup v1 a run whose program can make TCP or UDP sockets
// needs room for their buffers (cgroup.Limits.SocketBytes); one for which
// this is true needs none (TestRefusesIPSockets proves it on the plans).
func RefusesIPSockets(profile string) bool {
	if from, ok := noProcOf(profile); ok {
		profile = from
	}
	return slices.Contains(seccompprofiles.Names(), profile)
}
