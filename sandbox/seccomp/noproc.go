package seccomp

import (
	"fmt"
	"slices"
	"strings"
)

// NoProcSuffix ends the name of a built-in filter that refuses new
// processes in the kernel: "default+noproc", "default+proxy+noproc". The
// planner selects it when a policy's Python layer denies every
// process-creation audit event and the profile itself allows processes.
//
// Why the kernel and not only the audit hook: a Python program can make a
// fresh copy of a built-in module without any audit event
// (importlib.machinery.BuiltinImporter.create_module on
// _posixsubprocess), whose fork_exec then forks and execs. The hook never
// sees it; this filter does: fork and vfork fail with EPERM, clone with
// EPERM unless it makes a thread (CLONE_THREAD, and still no namespace
// flag), clone3 with ENOSYS as in every built-in profile. Threads keep
// working.
//
// Unlike the socket variants (variant.go), which add allowances, this one
// removes them: it drops every rule of the profile on fork, vfork, clone
// and clone3 and puts its own in their place, so what it refuses does
// not depend on how the profile wrote those rules. It stacks on a socket
// variant, always last: base, then +loopback or +proxy, then +noproc.
const NoProcSuffix = "+noproc"

// noProcProfiles are the built-in profiles that allow new processes, the
// ones with a +noproc variant. strict already refuses them with the same
// rules (TestRefusesProcesses checks both on the compiled plans).
var noProcProfiles = []string{"default"}

// noProcSyscalls are the syscalls whose rules WithoutProcesses replaces.
var noProcSyscalls = []string{"clone", "clone3", "fork", "vfork"}

// noProcRules replace the profile's rules on noProcSyscalls; they are
// strict.json's.
const noProcRules = `[
	{
		"comment": "+noproc: clone3 passes its flags in memory that seccomp cannot read: ENOSYS makes glibc fall back to clone, whose flags are checked below.",
		"names": ["clone3"],
		"action": "SCMP_ACT_ERRNO",
		"errnoRet": 38
	},
	{
		"comment": "+noproc: fork and vfork make a process.",
		"names": ["fork", "vfork"],
		"action": "SCMP_ACT_ERRNO",
		"errnoRet": 1
	},
	{
		"comment": "+noproc: clone EPERM unless the next rule allows it: no new processes, and no namespace flag.",
		"names": ["clone"],
		"action": "SCMP_ACT_ERRNO",
		"errnoRet": 1
	},
	{
		"comment": "+noproc: clone for a thread: CLONE_THREAD (0x10000) set and none of the seven namespace flags (0x7E020000).",
		"names": ["clone"],
		"action": "SCMP_ACT_ALLOW",
		"args": [{"index": 0, "value": 2114125824, "valueTwo": 65536, "op": "SCMP_CMP_MASKED_EQ"}]
	}
]`

// WithoutProcesses returns a copy of p, named p.Name+NoProcSuffix, whose
// rules on fork, vfork, clone and clone3 are noProcRules instead of its
// own; p is unchanged. A profile that already has the suffix is an error,
// and so is one whose rules then fail to plan: the caller refuses the run
// rather than load a filter that allows processes.
func (p *Profile) WithoutProcesses() (*Profile, error) {
	if strings.HasSuffix(p.Name, NoProcSuffix) {
		return nil, fmt.Errorf("seccomp profile %s: already the %s variant", p.Name, NoProcSuffix)
	}
	others := slices.DeleteFunc(slices.Clone(p.rules), func(r rule) bool { return slices.Contains(noProcSyscalls, r.syscall) })
	return p.derive(NoProcSuffix, noProcRules, others)
}

// noProcOf reports whether name is a built-in filter with NoProcSuffix,
// and the built-in filter it is made from ("default", "default+proxy").
func noProcOf(name string) (from string, ok bool) {
	from, cut := strings.CutSuffix(name, NoProcSuffix)
	if !cut {
		return "", false
	}
	base := from
	if b, _, ok := variantOf(from); ok {
		base = b
	}
	return from, slices.Contains(noProcProfiles, base)
}

// baseOf is the built-in profile a built-in filter is compiled from:
// "default" for "default+proxy+noproc"; name itself for anything else.
func baseOf(name string) string {
	if from, ok := noProcOf(name); ok {
		name = from
	}
	if b, _, ok := variantOf(name); ok {
		return b
	}
	return name
}

// RefusesProcesses reports whether the filter a run loads for profile (a
// name from Builtins, an absolute path, or "none") is known to refuse
// every new process: a +noproc variant does, and so does every built-in
// filter of a profile without one (strict). A profile of the user's own
// is not analysed: false, and the planner leaves it as it is.
func RefusesProcesses(profile string) bool {
	if !IsBuiltin(profile) {
		return false
	}
	_, ok := noProcOf(profile)
	return ok || !slices.Contains(noProcProfiles, baseOf(profile))
}
