// Package seccomp turns an OCI runtime-spec seccomp profile into a classic
// BPF program and loads it into the sandbox init, as its last step before
// execve.
//
// The work is split three ways on purpose:
//
//   - At build time, `go generate ./seccomp-profiles` compiles the built-in
//     profiles (default, strict) and their variants (WithVariant:
//     default+loopback, which a policy selects with
//     sandbox.loopback_sockets, and default+proxy, for the network
//     allowlist mode) with this package's Load and Compile and
//     checks the raw filters in as goldens (seccomp-profiles/gen). A test
//     fails when a golden differs from what the profile and libseccomp
//     give now.
//   - In the supervisor (host side, before the init is started),
//     LoadFilter is the one entry point. A built-in profile's filter is its
//     golden, embedded in the binary and only checked (compiled from the
//     JSON this binary embeds, whole instructions within BPF_MAXINSNS): no
//     parsing, no libseccomp, no disk. A user's profile (an absolute path)
//     is read and validated by Load and compiled by Compile for the native
//     architecture with libseccomp (cgo; the release binary links Debian's
//     libseccomp.a statically), through a disk cache in the state
//     directory keyed by everything that decides the result, which pays
//     for itself (docs/benchmarks.md). Errors name the profile file, the
//     line and the culprit. On an architecture without goldens a built-in
//     profile is compiled like a user's: slower, never unfiltered.
//   - Only the raw sock_filter array crosses into the init. load.Install (the
//     load package) loads it with one seccomp(2) system call through
//     golang.org/x/sys/unix: pure Go, no cgo, no parser and no library
//     between no_new_privs and execve.
//
// So the process that becomes the sandbox never calls libseccomp. (Being the
// same binary, it does run libseccomp-golang's package initializer at
// start-up, like every nsbox process: seccomp_api_get, a few seccomp(2)
// probes that fail by design. Nothing is built or loaded there.)
//
// A golden does not depend on the kernel it runs on: libseccomp's output
// depends on the profile, the architecture and libseccomp itself, all
// fixed at build time. Whether the kernel can run it (filter mode,
// SECCOMP_RET_KILL_PROCESS) is Supported's question, asked before every
// run that uses a filter.
//
// # Semantics beyond runc
//
// The profile format is runc's and Docker's, with two differences, both
// checked at Load so that nothing is silently dropped:
//
//   - A syscall may have one unconditional rule plus conditional rules with
//     other actions: the conditional rules are exceptions and win (for
//     example "allow ioctl" plus "EPERM for ioctl TIOCSTI"). libseccomp
//     itself would keep only the unconditional rule. Compile realises the
//     unconditional rule as masked-equality rules covering exactly the values
//     no exception matches; so an exception's conditions must be
//     SCMP_CMP_EQ or SCMP_CMP_MASKED_EQ (on one argument or several, one
//     condition per argument, ANDed as libseccomp does).
//   - Everything libseccomp would resolve silently or arbitrarily is an
//     error: a syscall name it does not know, a syscall listed without
//     conditions twice, two conditional rules with different actions that
//     can match the same call, two conditions on one argument in a rule
//     (runc reads them as OR, libseccomp as AND), conditions that always or
//     never match, and the actions and flags nsbox cannot honour
//     (SCMP_ACT_NOTIFY, SCMP_ACT_TRACE, any "flags", a listener).
//
// # Fixed choices
//
// A syscall made with another architecture's ABI (int 0x80 on x86_64, x32
// numbers) kills the process (SECCOMP_RET_KILL_PROCESS): CPython never does
// it, so it can only be an attempt to reach syscall numbers the profile did
// not consider, and a dead process with SIGSYS is a verdict the supervisor
// can report. load.Install sets no filter flag: not TSYNC (see there) and never
// SPEC_ALLOW, which would turn off the kernel's speculative store bypass
// mitigation for the sandbox.
//
// WARNING: the init must call load.Install on the thread that calls execve, after
// PR_SET_NO_NEW_PRIVS. After any change here, regenerate the goldens and
// run as root:
//
//	go generate ./seccomp-profiles
//	go test -race -count=1 ./sandbox/seccomp/... ./seccomp-profiles/...
package seccomp
