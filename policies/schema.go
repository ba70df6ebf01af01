package policies

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nsbox/nsbox/sandbox/netproxy"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// Key is one entry of the policy schema: everything nsbox knows about a
// key. Decoding, validation, error text, "nsbox policy show" and the
// reference page docs/policies.md are all produced from the table of Keys
// (schema, below); adding a key is one entry there plus its use.
type Key struct {
	Name     string // dotted, as written in TOML: "limits.timeout"
	Unit     string // what a number counts, when its type does not say: "CPUs"
	Required bool   // a policy without extends must set it
	Example  string // a value as TOML, for the docs and for the hint when the key is missing
	Doc      string // one paragraph for docs/policies.md, in Markdown

	// field points into a Policy at the value the key sets; its Go type
	// gives the key's TOML type (Key.kind). nil only for extends, which
	// names a parent instead of setting a value.
	field func(*Policy) any
	// bounds is the range of a number, duration or size; nil when none.
	bounds bounds
	// values are the only values a string, or the only entries a list,
	// may hold, in their canonical order: a list resolved from additions
	// and removals comes out in this order (sorted when values is nil).
	values func() []string
	// allowed is the "(allowed: ...)" text; nil derives it from bounds,
	// values or the type.
	allowed func() string
	// elem is the problem with one entry of a list, or "".
	elem func(k *Key, entry string) string
	// check validates the key's value on the resolved policy, including
	// checks against other keys; bounds, elem and duplicate entries are
	// checked before it.
	check func(k *Key, p *Policy, at reporter) error
}

// reporter returns an *Error for key (a toml.Key string), placed at the
// line the key's value came from.
type reporter func(key, format string, args ...any) error

// Keys returns the policy schema in its canonical order: the order of
// "nsbox policy show --resolved" and of docs/policies.md.
func Keys() []Key { return slices.Clone(schema) }

// keyExtends is the one key that sets no Policy field.
const keyExtends = "extends"

// Suffixes of the keys that edit an inherited list: imports_add,
// imports_remove.
const (
	addSuffix    = "_add"
	removeSuffix = "_remove"
)

var schema = []Key{
	{
		Name: keyExtends, Example: `"default"`,
		Doc: "The policy this one starts from: a built-in name or the path of another policy file, " +
			"relative to this file's directory. Only what differs need be written: every key left out is " +
			"inherited, a key that is set replaces the parent's value, `[env]` is merged (this file wins), " +
			"and each list takes additions and removals through `KEY_add` and `KEY_remove`.",
		allowed: func() string {
			return "a built-in policy (" + strings.Join(builtinNames, ", ") +
				`) or the path of a policy file, relative to this file's directory, such as "./base.toml"`
		},
	},
	{
		Name: "description", Example: `"Tight limits for untrusted agent code."`,
		Doc:     "Free text describing the policy, shown by `nsbox policy list`.",
		field:   func(p *Policy) any { return &p.Description },
		allowed: func() string { return "any string" },
	},
	{
		Name: "python.root", Required: true, Example: `"base"`,
		Doc: "The root filesystem the program runs in, mounted read-only as `/`: its interpreter, standard " +
			"library and vetted packages. A built-in root (`base`: the standard library only, built from the " +
			"host's Python on first use; `datasci`: numpy, pandas, matplotlib, seaborn, scipy, statsmodels, " +
			"scikit-learn, openpyxl and pyarrow, built with `make datasci`; `datasci-min`: numpy, pandas and " +
			"matplotlib, built with `make datasci-min`; " +
			"`web`: requests, httpx and certifi, built with `make web`) " +
			"or the absolute path of a root built by `nsbox rootfs build`.",
		field: func(p *Policy) any { return &p.Python.Root },
		allowed: func() string {
			return `a built-in root (` + strings.Join(BuiltinRoots, ", ") + `) or the absolute, clean path of a root built by "nsbox rootfs build"`
		},
		check: checkRoot,
	},
	{
		Name: "python.verify", Required: true, Example: `"quick"`,
		Doc: "How the root is checked against its manifest before each run: `quick` checks the manifest's " +
			"hash and the interpreter, loader and libc by size and mode; `full` re-hashes every file first " +
			"(slower; catches any change).",
		field:  func(p *Policy) any { return &p.Python.Verify },
		values: func() []string { return []string{VerifyQuick, VerifyFull} },
		allowed: func() string {
			return `"quick" (the manifest and critical files, every run) or "full" (re-hash every file first)`
		},
		check: checkVerify,
	},
	{
		Name: "python.mode", Example: `"guarded"`,
		Doc: "How the runner holds the program's Python: `guarded` checks its imports and builtins before it " +
			"runs and again while it runs (an audit hook), and with `allowlist.strict_attributes` refuses " +
			"underscore attributes it can see; `restricted` (which needs `allowlist.strict_attributes = true`) " +
			"also compiles the program with RestrictedPython, so every attribute read and write, item access " +
			"and iteration goes through nsbox's guards, and constructs the guards cannot hold (`match`, " +
			"metaclasses, `async`, most dunder methods) are refused before anything runs. Absent: `guarded`.",
		field:  func(p *Policy) any { return &p.Python.Mode },
		values: func() []string { return []string{ModeGuarded, ModeRestricted} },
		allowed: func() string {
			return `"guarded" (checked imports and builtins, an audit hook) or "restricted" (also compiled by RestrictedPython; needs allowlist.strict_attributes = true)`
		},
		check: checkMode,
	},
	{
		Name: "limits.timeout", Required: true, Example: `"30s"`,
		Doc:    "Wall-clock limit for the whole run; at the deadline every process of the run is killed (status `timeout`).",
		field:  func(p *Policy) any { return &p.Limits.Timeout },
		bounds: durationRange{100 * time.Millisecond, 24 * time.Hour},
	},
	{
		Name: "limits.output_limit", Required: true, Example: `"1MiB"`,
		Doc:    "Most bytes kept from stdout and, separately, from stderr; output beyond it is cut off and the result says so.",
		field:  func(p *Policy) any { return &p.Limits.OutputLimit },
		bounds: sizeRange{kib, gib},
	},
	{
		Name: "limits.output_mode", Example: `"kill"`,
		Doc: "What a stream past `output_limit` does to the run: `kill` stops it (status `output_limit`); " +
			"`truncate` lets the program finish and keeps the first and the last part of the stream, " +
			"`output_limit` bytes in all, with `stdout_truncated`/`stderr_truncated` set (plain output shows " +
			"the head as it comes, then a one-line marker and the tail at the end). A session's cells always " +
			"truncate (each cell's head). Absent: `kill`, as before the key existed.",
		field:  func(p *Policy) any { return &p.Limits.OutputMode },
		values: func() []string { return []string{OutputKill, OutputTruncate} },
		allowed: func() string {
			return `"kill" (stop the run) or "truncate" (keep the head and the tail, let it finish)`
		},
		check: checkOutputMode,
	},
	{
		Name: "limits.program_size", Required: true, Example: `"1MiB"`,
		Doc: "Largest program nsbox accepts, from `-c`, a file or standard input; a larger one is refused " +
			"before anything runs (it is read only up to this size).",
		field:  func(p *Policy) any { return &p.Limits.ProgramSize },
		bounds: sizeRange{kib, 64 * mib},
	},
	{
		Name: "limits.memory", Required: true, Example: `"512MiB"`,
		Doc: "Memory of all the run's processes together (cgroup `memory.max`; swap is off). Past it the " +
			"kernel's OOM killer ends the run: status `memory_limit`.",
		field:  func(p *Policy) any { return &p.Limits.Memory },
		bounds: sizeRange{16 * mib, 64 * gib},
	},
	{
		Name: "limits.pids", Required: true, Example: `64`, Unit: "processes and threads",
		Doc:    "Processes and threads the run may have at once (cgroup `pids.max`); past it fork and thread creation fail inside the sandbox.",
		field:  func(p *Policy) any { return &p.Limits.Pids },
		bounds: intRange{4, 4096},
	},
	{
		Name: "limits.cpus", Required: true, Example: `1.0`, Unit: "CPUs",
		Doc: "CPU time per wall-clock second (cgroup `cpu.max`; 0.5 is half of one CPU). Also sets " +
			"`OMP_NUM_THREADS`, `OPENBLAS_NUM_THREADS` and `MKL_NUM_THREADS` to the quota rounded up.",
		field:  func(p *Policy) any { return &p.Limits.CPUs },
		bounds: floatRange{0.1, 64},
	},
	{
		Name: "limits.cpu_time", Required: true, Example: `"30s"`, Unit: "whole seconds",
		Doc: "CPU time each process may use (`RLIMIT_CPU`), a second line behind the wall clock: the run " +
			"ends with status `timeout` and limit `cpu_time`.",
		field:   func(p *Policy) any { return &p.Limits.CPUTime },
		bounds:  durationRange{time.Second, 24 * time.Hour},
		allowed: func() string { return durationRange{time.Second, 24 * time.Hour}.String() + " in whole seconds" },
		check:   checkWholeSeconds,
	},
	{
		Name: "limits.open_files", Required: true, Example: `1024`, Unit: "file descriptors",
		Doc:    "Open file descriptors per process (`RLIMIT_NOFILE`).",
		field:  func(p *Policy) any { return &p.Limits.OpenFiles },
		bounds: intRange{16, 65536},
	},
	{
		Name: "limits.file_size", Required: true, Example: `"64MiB"`,
		Doc:    "Largest file a process may write (`RLIMIT_FSIZE`); writing past it fails with `EFBIG`.",
		field:  func(p *Policy) any { return &p.Limits.FileSize },
		bounds: sizeRange{mib, 16 * gib},
	},
	{
		Name: "limits.stack", Required: true, Example: `"8MiB"`,
		Doc:    "Stack of the main thread (`RLIMIT_STACK`).",
		field:  func(p *Policy) any { return &p.Limits.Stack },
		bounds: sizeRange{mib, gib},
	},
	{
		Name: "limits.workspace_size", Required: true, Example: `"256MiB"`,
		Doc: "Size of the fresh `/workspace`, a tmpfs made for the run; writes beyond it fail with `ENOSPC` " +
			"and the result lists `workspace_size` in `limits_reached`. Its pages are memory of the run's " +
			"cgroup, so it also counts against `limits.memory` and must be below it. A `--workspace` directory is bounded only " +
			"when its filesystem is no larger than this and `limits.workspace_inodes` (see `sandbox.require`).",
		field:  func(p *Policy) any { return &p.Limits.WorkspaceSize },
		bounds: sizeRange{mib, 64 * gib},
		check:  checkWorkspaceSize,
	},
	{
		Name: "limits.workspace_inodes", Required: true, Example: `16384`, Unit: "files, directories and links",
		Doc: "Most inodes of the fresh `/workspace`, its own directory included: creating more fails with `ENOSPC` and the result lists " +
			"`workspace_inodes` in `limits_reached`.",
		field:  func(p *Policy) any { return &p.Limits.WorkspaceInodes },
		bounds: intRange{16, 1 << 24},
	},
	{
		Name: "filesystem.tmp_size", Required: true, Example: `"64MiB"`,
		Doc:    "Size of the writable tmpfs mounted at `/tmp`; writes beyond it fail with `ENOSPC`.",
		field:  func(p *Policy) any { return &p.Filesystem.TmpSize },
		bounds: sizeRange{mib, 16 * gib},
	},
	{
		Name: "filesystem.shm_size", Required: true, Example: `"16MiB"`,
		Doc:    "Size of the tmpfs mounted at `/dev/shm` (POSIX shared memory, used by multiprocessing).",
		field:  func(p *Policy) any { return &p.Filesystem.ShmSize },
		bounds: sizeRange{mib, 16 * gib},
	},
	{
		Name: "sandbox.require", Required: true, Example: `["namespaces", "cgroups", "seccomp"]`,
		Doc: "Protections the run cannot go without: a host that lacks one refuses the run before it " +
			"starts (exit 125, status `sandbox_error`, with the fix from `nsbox doctor`). A protection in use " +
			"but not listed is skipped on such a host, and the run's result reports what was active. " +
			"`bounded_workspace` also refuses a `--workspace` directory whose filesystem is larger than " +
			"`limits.workspace_size` or `limits.workspace_inodes`: nothing else bounds what a run writes there " +
			"(the fresh workspace is always bounded).",
		field:  func(p *Policy) any { return &p.Sandbox.Require },
		values: func() []string { return Requirements },
		allowed: func() string {
			return "an array of distinct names from " + strings.Join(Requirements, ", ")
		},
		elem: func(k *Key, r string) string {
			if !slices.Contains(Requirements, r) {
				return fmt.Sprintf("unknown requirement %q (allowed: %s)", r, k.Allowed())
			}
			return ""
		},
	},
	{
		Name: "sandbox.seccomp", Required: true, Example: `"default"`,
		Doc: "The seccomp profile applied right before the interpreter starts: `none`, a built-in profile " +
			"(`seccomp-profiles/`) or the absolute path of an OCI runtime-spec seccomp JSON file. " +
			"`\"none\"` cannot be combined with `\"seccomp\"` in `sandbox.require`. A policy whose " +
			"`allowlist.deny_events` denies every process-creation event gets the built-in profile's " +
			"no-process variant ([seccomp.md](seccomp.md#no-process-variants)); a profile file is used as it is.",
		field: func(p *Policy) any { return &p.Sandbox.Seccomp },
		allowed: func() string {
			return `"none", a built-in profile (` + strings.Join(seccompprofiles.Names(), ", ") +
				`) or an absolute, clean path to an OCI seccomp JSON file`
		},
		check: checkSeccomp,
	},
	{
		Name: "sandbox.landlock", Required: true, Example: `true`,
		Doc: "Add a Landlock ruleset where the kernel has it: the filesystem is read-only except " +
			"`/workspace`, `/tmp` and `/dev/shm`. `false` cannot be combined with `\"landlock\"` in `sandbox.require`.",
		field: func(p *Policy) any { return &p.Sandbox.Landlock },
		check: checkLandlock,
	},
	{
		Name: "sandbox.loopback_sockets", Example: `false`,
		Doc: "Let the program create `AF_INET` and `AF_INET6` sockets, for servers and clients on the " +
			"sandbox's own loopback (a test server, a multiprocessing manager over TCP); the network namespace " +
			"has no other interface, so they reach nothing outside. `false`: the built-in seccomp profile " +
			"refuses them with `EPERM`, and `AF_UNIX` sockets work. `true` selects the profile's loopback " +
			"variant (`default+loopback`); socket buffers then count against `limits.memory` (on cgroup v1, " +
			"an eighth of it is set aside for them in `memory.kmem.tcp.limit_in_bytes`, as in network allowlist mode). `true` needs a " +
			"built-in profile or `\"none\"` in `sandbox.seccomp`: a profile of your own decides for itself.",
		field: func(p *Policy) any { return &p.Sandbox.LoopbackSockets },
		check: checkLoopbackSockets,
	},
	{
		Name: "network.mode", Example: `"none"`,
		Doc: "What the program can reach beyond its sandbox. `none`: nothing; its network namespace has only " +
			"loopback. `allowlist`: HTTP and HTTPS to the hosts of `network.allow`, through a proxy nsbox serves " +
			"from the host on the sandbox's loopback (`HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` point at it); " +
			"the program still has no route, no resolver and no UDP, and every connection is in the result and " +
			"the audit log (docs/network.md). Absent: `none`. `nsbox run --network none` turns `allowlist` off " +
			"for one run.",
		field:  func(p *Policy) any { return &p.Network.Mode },
		values: func() []string { return []string{NetworkNone, NetworkAllowlist} },
		allowed: func() string {
			return `"none" (loopback only) or "allowlist" (HTTP and HTTPS to network.allow through nsbox's proxy)`
		},
		check: checkNetworkMode,
	},
	{
		Name: "network.allow", Example: `["api.example.com:443", "*.pypi.org:443", "127.0.0.1:8080"]`,
		Doc: "The hosts the proxy connects to in `allowlist` mode, each `host:port`: a DNS name, a wildcard " +
			"`*.name` (any name below `name`, never `name` itself) or an IP literal (`[::1]:8080` for IPv6); the " +
			"port is required. Names are resolved on the host, and a name that resolves to a loopback, private or " +
			"link-local address is refused (DNS rebinding): such addresses are reachable only through an IP " +
			"literal entry. Everything else is refused with an HTTP 403 that names the policy and the host.",
		field: func(p *Policy) any { return &p.Network.Allow },
		allowed: func() string {
			return `an array of "host:port" entries: a name, "*.name" or an IP literal, port 1..65535, such as ["api.example.com:443"]`
		},
		elem: func(k *Key, e string) string {
			if _, err := netproxy.ParseRule(e); err != nil {
				return fmt.Sprintf("%v (allowed: %s)", err, k.Allowed())
			}
			return ""
		},
	},
	{
		Name: "network.max_connections", Example: `32`, Unit: "connections at once",
		Doc: "Most connections through the proxy at the same time; one more is refused. Each holds a fixed " +
			"amount of the supervisor's memory (docs/network.md), so this also bounds what the proxy can hold " +
			"for the program.",
		field:  func(p *Policy) any { return &p.Network.MaxConnections },
		bounds: intRange{1, 256},
	},
	{
		Name: "network.max_bytes", Example: `"256MiB"`,
		Doc: "Most bytes through the proxy in one run (a session: its whole life), both ways together; the " +
			"connection that reaches it is closed and later ones are refused.",
		field:  func(p *Policy) any { return &p.Network.MaxBytes },
		bounds: sizeRange{kib, 64 * gib},
	},
	{
		Name: "allowlist.imports", Required: true, Example: `["math", "json"]`,
		Doc: "Top-level modules the program may import, or `[\"*\"]` alone for every module. Imports made " +
			"inside an allowed module are not checked. The Python layer (`sandbox/pyrunner`) checks the " +
			"program before it runs and watches it while it runs; it is policy and telemetry, the OS " +
			"sandbox is the security boundary.",
		field: func(p *Policy) any { return &p.Allowlist.Imports },
		allowed: func() string {
			return `an array of top-level module names such as ["math", "json"], or ["*"] for every module`
		},
		elem: func(k *Key, m string) string {
			if m != AllImports && !isIdent(m, false) {
				return fmt.Sprintf("%q is not a top-level module name (allowed: %s)", m, k.Allowed())
			}
			return ""
		},
		check: checkImports,
	},
	{
		Name: "allowlist.preload", Example: `["json", "statistics"]`,
		Doc: "Modules a warm sandbox imports before its program: one the service keeps ready in its pool, " +
			"or a session's before its first cell. The runner imports them as its own imports, before the " +
			"audit hook is armed, so the program finds them loaded and saves their import time; the program " +
			"is then checked and watched exactly as in a cold run. Each must be allowed by " +
			"`allowlist.imports` (its top-level name, for a dotted name such as `matplotlib.pyplot`): " +
			"preloading never lets the program import more. A cold `nsbox run` ignores this key (it would " +
			"only add the imports' time to the run).",
		field: func(p *Policy) any { return &p.Allowlist.Preload },
		allowed: func() string {
			return `an array of module names allowed by allowlist.imports, such as ["numpy", "matplotlib.pyplot"]`
		},
		elem: func(k *Key, m string) string {
			for _, part := range strings.Split(m, ".") {
				if !isIdent(part, false) {
					return fmt.Sprintf("%q is not a module name (allowed: %s)", m, k.Allowed())
				}
			}
			return ""
		},
		check: checkPreload,
	},
	{
		Name: "allowlist.deny_builtins", Required: true, Example: `["eval", "exec"]`,
		Doc: "Builtins the program cannot use. `open` denies opening files for writing outside " +
			"`/workspace`, `/tmp` and `/dev/shm`; reading stays allowed.",
		field:  func(p *Policy) any { return &p.Allowlist.DenyBuiltins },
		values: func() []string { return DenyableBuiltins },
		allowed: func() string {
			return "an array of distinct names from " + strings.Join(DenyableBuiltins, ", ")
		},
		elem: func(k *Key, b string) string {
			if !slices.Contains(DenyableBuiltins, b) {
				return fmt.Sprintf("%q cannot be denied (allowed: %s)", b, k.Allowed())
			}
			return ""
		},
	},
	{
		Name: "allowlist.deny_events", Required: true, Example: `["subprocess.Popen"]`,
		Doc:   "PEP 578 audit events refused while the program runs (`PermissionError`, recorded in the result).",
		field: func(p *Policy) any { return &p.Allowlist.DenyEvents },
		allowed: func() string {
			return `an array of PEP 578 audit event names such as ["subprocess.Popen", "socket.connect"]`
		},
		elem: func(k *Key, e string) string {
			if !isIdent(e, true) {
				return fmt.Sprintf("%q is not an audit event name (allowed: %s)", e, k.Allowed())
			}
			return ""
		},
	},
	{
		Name: "allowlist.strict_attributes", Required: true, Example: `false`,
		Doc: "Refuse attribute names starting with `_` (`random._os`, `__globals__`, `__subclasses__`) and hand " +
			"the program a module reached as an attribute of another (`json.codecs`) only if the allowlist allows it.",
		field: func(p *Policy) any { return &p.Allowlist.StrictAttributes },
	},
	{
		Name: "audit.store_code", Required: true, Example: `false`,
		Doc:   "Keep the program's source in the audit log; its SHA-256 is always kept.",
		field: func(p *Policy) any { return &p.Audit.StoreCode },
	},
	{
		Name: "env", Example: `{ TZ = "UTC" }`,
		Doc: "Extra environment variables for the program, one `NAME = \"value\"` per line under `[env]`. " +
			"Names nsbox sets itself (`PATH`, `HOME`, the `*_NUM_THREADS` variables from `limits.cpus`) and " +
			"names that would change which code runs (`PYTHONPATH`, `LD_PRELOAD`) are reserved.",
		field: func(p *Policy) any { return &p.Env },
		allowed: func() string {
			return `an [env] table of NAME = "value" entries: names matching ` + envNamePattern +
				", values without NUL; reserved: " + strings.Join(sortedKeys(reservedEnv), ", ")
		},
		check: checkEnv,
	},
}

// DenyableBuiltins are the builtins a policy may deny: the runner's list,
// the one place that knows which builtins it can take away.
var DenyableBuiltins = pyrunner.DenyableBuiltins
