// Package hostcheck finds out what this host can enforce: the namespaces,
// the mount API, cgroup controllers, seccomp and Landlock that nsbox relies
// on, each with the kernel version that introduced it and, when it is
// missing, how to get it.
//
// There are two entry points with different costs:
//
//   - Probe is `nsbox doctor`: it really exercises each feature the way a
//     run uses it. It starts short-lived children (the nsbox binary
//     re-executed with the hidden ChildCommand) in new namespaces, attaches
//     a detached mount in one, mounts a procfs in another and, on cgroup
//     v2, clones one into a temporary cgroup. Every child is killed after
//     childTimeout at the latest, and every temporary directory and cgroup
//     is removed.
//   - Require runs before every `nsbox run`. It never forks: it reads
//     /proc and /sys, asks the cgroup and seccomp packages, and makes a few
//     syscalls that have no lasting effect. It fails closed, naming every
//     requirement the host lacks with the doctor's hint.
//
// A requirement ("namespaces", "cgroups", "seccomp", "landlock",
// "memfd_noexec") is the
// unit a policy asks for (policies.Policy.Sandbox.Require); each Check
// belongs to at most one requirement (its Group). Checks with an empty
// Group are informational: nsbox uses the feature when it is there.
package hostcheck
