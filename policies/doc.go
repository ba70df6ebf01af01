// Package policies loads and validates nsbox sandbox policies: the shipped
// built-ins (strict, default, permissive, embedded from the .toml files in
// this directory) and policy files written by users.
//
// # Format
//
// A policy is a TOML document:
//
//	description = "Tight limits for untrusted agent code."  # optional
//
//	[python]
//	root   = "base"          # built-in root (base, datasci) or absolute path of a built root
//	verify = "quick"         # "quick" or "full" check against the root's manifest
//
//	[limits]
//	timeout      = "10s"     # wall clock; 100ms..24h
//	output_limit = "64KiB"   # per stream (stdout, stderr); 1KiB..1GiB
//	memory       = "256MiB"  # cgroup memory, swap off; 16MiB..64GiB
//	pids         = 32        # cgroup pids.max; 4..4096
//	cpus         = 1.0       # cgroup CPU quota in CPUs; 0.1..64
//	cpu_time     = "10s"     # RLIMIT_CPU per process, whole seconds; 1s..24h
//	open_files   = 256       # RLIMIT_NOFILE; 16..65536
//	file_size    = "16MiB"   # RLIMIT_FSIZE; 1MiB..16GiB
//	stack        = "8MiB"    # RLIMIT_STACK; 1MiB..1GiB
//
//	[filesystem]
//	tmp_size = "16MiB"       # /tmp tmpfs; 1MiB..16GiB
//	shm_size = "8MiB"        # /dev/shm tmpfs; 1MiB..16GiB
//
//	[sandbox]
//	require  = ["namespaces", "cgroups", "seccomp"]  # refuse the run without these
//	seccomp  = "strict"      # "none", a built-in profile, or an absolute path to OCI JSON
//	landlock = true          # Landlock ruleset where the kernel has it
//
//	[env]                    # optional extra environment variables
//	TZ = "UTC"
//
// Every key except description and [env] is required; there are no hidden
// defaults, so a policy file says everything the sandbox will allow. Unknown
// keys, including differently capitalised ones, are rejected. Durations are
// Go duration strings; sizes are strings with a binary unit (B, KiB, MiB,
// GiB) or integers counting bytes. Paths are not checked for existence here:
// the run does that on the host it runs on. [env] may not set names nsbox
// owns (PATH, HOME, LANG, PYTHONDONTWRITEBYTECODE, PYTHONUNBUFFERED) or names
// that change what runs (PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, PYTHONINSPECT,
// LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT). OMP_NUM_THREADS,
// OPENBLAS_NUM_THREADS and MKL_NUM_THREADS come from limits.cpus.
//
// sandbox.require makes a run fail closed: a listed protection the host
// cannot give refuses the run. A protection in use but not listed is skipped
// on such a host, and the run's result reports what was active.
//
// Every error is an *Error that names the place at fault and what would be
// accepted:
//
//	strict.toml:12: limits.timeout: 45h exceeds the maximum 24h (allowed: 100ms..24h)
//
// # Narrowing
//
// Command-line flags arrive as Overrides and are applied with
// Policy.Narrow. They can only lower a limit, never raise it: a policy is
// the most a run may get, and whoever picks the policy, not whoever types
// the command, decides that maximum.
package policies
