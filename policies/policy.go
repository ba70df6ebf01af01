package policies

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nsbox/nsbox/sandbox/roots"
)

// Policy is a validated sandbox policy, after extends. Each field but
// Name and SHA256 is set by one key of the schema (schema.go), which
// documents it, with its range, in docs/policies.md; the comments below
// name the key.
type Policy struct {
	Name        string // the built-in name ("strict") or the file path, as given
	Description string // description
	Python      Python
	Limits      Limits
	Filesystem  Filesystem
	Sandbox     Sandbox
	Network     Network
	Allowlist   Allowlist
	Audit       Audit
	// SHA256 identifies what the run got, for the audit log: the hash of
	// the policy file's bytes, followed with extends by the parent's
	// SHA256 (hex), so it covers the whole chain.
	SHA256 string
	Env    map[string]string // [env]; never nil after parsing
}

// Python says which root filesystem, with its interpreter and vetted
// packages, the program runs in, and how hard it is checked first.
type Python struct {
	Root   string // python.root: a name from BuiltinRoots or the absolute path of a built root
	Verify string // python.verify: VerifyQuick or VerifyFull
	Mode   string // python.mode: ModeGuarded, ModeRestricted, or "" (absent: ModeGuarded)
}

// Restricted reports whether the program is compiled by RestrictedPython
// (python.mode "restricted").
func (p Python) Restricted() bool { return p.Mode == ModeRestricted }

// The runner's modes of holding the program's Python (python.mode).
const (
	ModeGuarded    = "guarded"    // static checks and the audit hook
	ModeRestricted = "restricted" // those, and the program compiled by RestrictedPython
)

// BuiltinRoots are the root names a policy may give instead of a path;
// they live in the roots directory (sandbox/roots).
var BuiltinRoots = roots.Names

// Root verification levels.
const (
	VerifyQuick = "quick" // every run: the manifest's hash and the critical files (interpreter, loader, libc) by size and mode
	VerifyFull  = "full"  // every run: re-hash every file of the root against its manifest first
)

// What a run does past limits.output_limit.
const (
	OutputKill     = "kill"     // the run is killed: status output_limit
	OutputTruncate = "truncate" // the run goes on; the head and the tail of the stream are kept
)

// Limits bound one run.
type Limits struct {
	Timeout     Duration // limits.timeout: wall clock
	OutputLimit Size     // limits.output_limit: per stream (stdout and stderr each)
	OutputMode  string   // limits.output_mode: OutputKill or OutputTruncate
	ProgramSize Size     // limits.program_size: the program's source
	Memory      Size     // limits.memory: cgroup memory limit, swap off
	Pids        int64    // limits.pids: cgroup pids.max
	CPUs        float64  // limits.cpus: cgroup CPU quota in CPUs
	CPUTime     Duration // limits.cpu_time: RLIMIT_CPU of each process, whole seconds
	OpenFiles   int64    // limits.open_files: RLIMIT_NOFILE
	FileSize    Size     // limits.file_size: RLIMIT_FSIZE
	Stack       Size     // limits.stack: RLIMIT_STACK of the main thread

	WorkspaceSize   Size  // limits.workspace_size: bytes of the fresh /workspace tmpfs
	WorkspaceInodes int64 // limits.workspace_inodes: files, directories and links of the fresh /workspace tmpfs
}

// Threads is the size of numeric thread pools (OMP_NUM_THREADS,
// OPENBLAS_NUM_THREADS, MKL_NUM_THREADS): the CPU quota rounded up. More
// threads than the quota only queue on it, and OpenBLAS would otherwise
// start one per host core at import.
func (l Limits) Threads() int {
	return max(1, int(math.Ceil(l.CPUs)))
}

// Filesystem sizes the writable tmpfs mounts.
type Filesystem struct {
	TmpSize Size // filesystem.tmp_size: the /tmp tmpfs
	ShmSize Size // filesystem.shm_size: the /dev/shm tmpfs
}

// Sandbox says which protections the run uses and which it requires.
type Sandbox struct {
	Require  []string // sandbox.require: protections without which the run is refused, from Requirements
	Seccomp  string   // sandbox.seccomp: "none", a built-in profile name, or an absolute path to OCI seccomp JSON
	Landlock bool     // sandbox.landlock: add a Landlock ruleset when the kernel has it
	// sandbox.loopback_sockets: allow AF_INET and AF_INET6 sockets (the
	// built-in seccomp profile's loopback variant)
	LoopbackSockets bool
}

// Network says whether the program reaches anything outside its sandbox:
// nothing (NetworkNone), or the named hosts through nsbox's proxy
// (NetworkAllowlist, docs/network.md).
type Network struct {
	Mode           string   // network.mode: NetworkNone or NetworkAllowlist
	Allow          []string // network.allow: "host:port" entries (netproxy.ParseRule)
	MaxConnections int64    // network.max_connections: concurrent connections through the proxy
	MaxBytes       Size     // network.max_bytes: bytes through the proxy per run, both ways
}

// Network modes.
const (
	NetworkNone      = "none"      // loopback only; the default
	NetworkAllowlist = "allowlist" // HTTP(S) to network.allow through the proxy
)

// Allowlisted reports whether the policy lets the program reach the
// network.allow hosts through the proxy.
func (p *Policy) Allowlisted() bool { return p.Network.Mode == NetworkAllowlist }

// Requirements are the protections a policy can require, in check order.
var Requirements = []string{"namespaces", "cgroups", "seccomp", "landlock", "memfd_noexec", "bounded_workspace"}

// Requires reports whether the policy lists req in sandbox.require.
func (p *Policy) Requires(req string) bool { return slices.Contains(p.Sandbox.Require, req) }

// Allowlist is the Python policy layer (sandbox/pyrunner): which modules
// the program may import and what it may not call. It is policy and
// telemetry; the OS sandbox is the security boundary.
type Allowlist struct {
	Imports          []string // allowlist.imports: top-level module names, or AllImports alone
	DenyBuiltins     []string // allowlist.deny_builtins: from DenyableBuiltins
	DenyEvents       []string // allowlist.deny_events: PEP 578 audit event names
	StrictAttributes bool     // allowlist.strict_attributes
	Preload          []string // allowlist.preload: modules a warm sandbox imports before the program
}

// AllImports is the Allowlist.Imports entry that allows every module.
const AllImports = "*"

// Audit configures the run's record in the audit log.
type Audit struct {
	StoreCode bool // audit.store_code: keep the program's source (its SHA-256 is always kept)
}

// Error is a problem at a place in a policy file.
type Error struct {
	File string // file path, or "NAME.toml" for a built-in
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key such as "limits.timeout"; empty for syntax errors
	Msg  string // what is wrong, ending in "(allowed: ...)" where that helps
}

// Error formats e as "FILE:LINE: KEY: MSG", leaving out an unknown line or key.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(or(e.File, "policy"))
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

//go:embed datasci.toml datasci-min.toml default.toml permissive.toml strict.toml web.toml
var builtinFS embed.FS

var builtinNames = []string{"datasci", "datasci-min", "default", "permissive", "strict", "web"}

// MaxFileSize bounds what LoadFile reads, so a policy path such as /dev/zero
// fails fast instead of exhausting memory.
const MaxFileSize = 1 << 20

// BuiltinNames returns the names of the shipped policies, sorted.
func BuiltinNames() []string { return slices.Clone(builtinNames) }

// Builtin returns a fresh copy of the shipped policy name.
func Builtin(name string) (*Policy, error) {
	if !slices.Contains(builtinNames, name) {
		return nil, fmt.Errorf("unknown built-in policy %q (built-ins: %s)", name, strings.Join(builtinNames, ", "))
	}
	return resolve(builtinSource(name))
}

// LoadFile reads and parses the policy file at path.
func LoadFile(path string) (*Policy, error) {
	src, err := fileSource(path)
	if err != nil {
		return nil, err
	}
	return resolve(src)
}

// Parse parses and validates a policy. name becomes Policy.Name and is the
// file named in errors; a relative extends path starts from its directory.
func Parse(name string, data []byte) (*Policy, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		abs = name
	}
	return resolve(&source{name: name, file: name, dir: filepath.Dir(name), id: abs, data: data})
}

// Resolve picks a built-in or a file. A value that contains '/' or names an
// existing regular file is a file; otherwise the name, with an optional
// ".toml" suffix stripped, must be a built-in ("strict.toml" means the
// built-in strict when no such file exists).
func Resolve(arg string) (*Policy, error) {
	src, err := locate(arg)
	if err != nil {
		return nil, err
	}
	return resolve(src)
}

// Source returns the text of the policy arg names, chosen as Resolve
// chooses, and the file its errors name ("NAME.toml" for a built-in). The
// text is as written: with extends, only what differs from the parent.
func Source(arg string) (file string, text []byte, err error) {
	src, err := locate(arg)
	if err != nil {
		return "", nil, err
	}
	return src.file, src.data, nil
}

func resolve(src *source) (*Policy, error) {
	r, err := load(src, nil)
	if err != nil {
		return nil, err
	}
	return r.p, nil
}

// locate finds the policy arg names, as Resolve documents.
func locate(arg string) (*source, error) {
	if strings.Contains(arg, "/") {
		return fileSource(arg)
	}
	if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		return fileSource(arg)
	}
	name := strings.TrimSuffix(arg, ".toml")
	if !slices.Contains(builtinNames, name) {
		return nil, fmt.Errorf("unknown policy %q: not a file and not a built-in (built-ins: %s; give a path such as ./%s.toml for a file)",
			arg, strings.Join(builtinNames, ", "), name)
	}
	return builtinSource(name), nil
}

// builtinSource returns the embedded text of the built-in name, which must
// be one of builtinNames.
func builtinSource(name string) *source {
	data, err := builtinFS.ReadFile(name + ".toml")
	if err != nil {
		// The names and the embedded files are listed side by side above.
		panic(fmt.Sprintf("policies: built-in %s is not embedded: %v", name, err))
	}
	return &source{name: name, file: name + ".toml", id: "builtin " + name, data: data}
}

// fileSource reads the policy file at path.
func fileSource(path string) (*source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, readErr(path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, readErr(path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read policy %s: larger than %s", path, Size(MaxFileSize))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", path, err)
	}
	return &source{name: path, file: path, dir: filepath.Dir(path), id: abs, data: data}, nil
}

// readErr wraps an I/O error as "read policy PATH: ...", dropping the
// *fs.PathError layer that would repeat the path.
func readErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("read policy %s: %w", path, err)
}

// Overrides come from command-line flags; zero means "not given". They may
// only narrow the policy.
type Overrides struct {
	Timeout     time.Duration
	OutputLimit int64
}

// Narrow applies o to p, refusing any value that would widen the policy, is
// not positive, or is below the range a policy file may set (100ms, 1KiB).
// On error p is unchanged and the error lists every refused flag.
func (p *Policy) Narrow(o Overrides) error {
	var errs []error
	check := func(flag string, given, limit any, widen, nonPositive bool) {
		switch {
		case nonPositive:
			errs = append(errs, fmt.Errorf("--%s %v must be positive (policy %s allows up to %v)", flag, given, p.Name, limit))
		case widen:
			errs = append(errs, fmt.Errorf("--%s %v exceeds the policy's limit of %v (policy %s); flags can only lower limits", flag, given, limit, p.Name))
		}
	}
	// A value within the policy's limit can still be below the range a
	// policy file may set; the key's bounds say so.
	inRange := func(flag, key string, v any, positive, widen bool) {
		if msg := keyNamed(key).bounds.problem(v); positive && !widen && msg != "" {
			errs = append(errs, fmt.Errorf("--%s %v: %s", flag, v, msg))
		}
	}
	if o.Timeout != 0 {
		widen := o.Timeout > p.Limits.Timeout.Duration
		check("timeout", Duration{o.Timeout}, p.Limits.Timeout, widen, o.Timeout < 0)
		inRange("timeout", "limits.timeout", Duration{o.Timeout}, o.Timeout > 0, widen)
	}
	if o.OutputLimit != 0 {
		widen := o.OutputLimit > int64(p.Limits.OutputLimit)
		check("output-limit", Size(o.OutputLimit), p.Limits.OutputLimit, widen, o.OutputLimit < 0)
		inRange("output-limit", "limits.output_limit", Size(o.OutputLimit), o.OutputLimit > 0, widen)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if o.Timeout != 0 {
		p.Limits.Timeout = Duration{o.Timeout}
	}
	if o.OutputLimit != 0 {
		p.Limits.OutputLimit = Size(o.OutputLimit)
	}
	return nil
}
