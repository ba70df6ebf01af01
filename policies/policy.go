package policies

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// Policy is a validated sandbox policy.
type Policy struct {
	Name        string            `toml:"-"` // built-in name ("strict") or the file path it came from
	Description string            `toml:"description"`
	Python      Python            `toml:"python"`
	Limits      Limits            `toml:"limits"`
	Filesystem  Filesystem        `toml:"filesystem"`
	Sandbox     Sandbox           `toml:"sandbox"`
	Allowlist   Allowlist         `toml:"allowlist"`
	Audit       Audit             `toml:"audit"`
	SHA256      string            `toml:"-"`   // of the policy's TOML text, recorded in the audit log
	Env         map[string]string `toml:"env"` // never nil after parsing
}

// Python says which root filesystem, with its interpreter and vetted
// packages, the program runs in, and how hard it is checked first.
type Python struct {
	Root   string `toml:"root"`   // a built-in root name (BuiltinRoots) or the absolute path of a root built by "nsbox rootfs build"
	Verify string `toml:"verify"` // VerifyQuick or VerifyFull
}

// BuiltinRoots are the root names a policy may give instead of a path;
// they live in the roots directory (sandbox/roots).
var BuiltinRoots = []string{"base", "datasci"}

// Root verification levels.
const (
	VerifyQuick = "quick" // every run: the manifest's hash and the critical files (interpreter, loader, libc) by size and mode
	VerifyFull  = "full"  // every run: re-hash every file of the root against its manifest first
)

// Limits bound one run.
type Limits struct {
	Timeout     Duration `toml:"timeout"`      // wall clock, e.g. "10s"; allowed 100ms..24h
	OutputLimit Size     `toml:"output_limit"` // per stream (stdout and stderr each), e.g. "64KiB"; allowed 1KiB..1GiB
	Memory      Size     `toml:"memory"`       // cgroup memory limit, swap off, e.g. "256MiB"; allowed 16MiB..64GiB
	Pids        int64    `toml:"pids"`         // cgroup pids.max: processes and threads together; allowed 4..4096
	CPUs        float64  `toml:"cpus"`         // cgroup CPU quota in CPUs (1.0 = one CPU); allowed 0.1..64
	CPUTime     Duration `toml:"cpu_time"`     // RLIMIT_CPU of each process, whole seconds; allowed 1s..24h
	OpenFiles   int64    `toml:"open_files"`   // RLIMIT_NOFILE; allowed 16..65536
	FileSize    Size     `toml:"file_size"`    // RLIMIT_FSIZE: largest file a process may write; allowed 1MiB..16GiB
	Stack       Size     `toml:"stack"`        // RLIMIT_STACK of the main thread; allowed 1MiB..1GiB
}

// Threads is the size of numeric thread pools (OMP_NUM_THREADS,
// OPENBLAS_NUM_THREADS, MKL_NUM_THREADS): the CPU quota rounded up. More
// threads than the quota only queue on it, and OpenBLAS would otherwise
// start one per host core at import.
func (l Limits) Threads() int {
	return max(1, int(math.Ceil(l.CPUs)))
}

// Sandbox says which protections the run uses and which it requires.
type Sandbox struct {
	// Require lists protections without which the run is refused: any of
	// Requirements. A protection in use but not required is skipped when
	// the host lacks it, and the result says so.
	Require  []string `toml:"require"`
	Seccomp  string   `toml:"seccomp"`  // "none", a built-in profile name, or an absolute path to an OCI seccomp JSON file
	Landlock bool     `toml:"landlock"` // add a Landlock ruleset (read-only except /workspace, /tmp, /dev/shm) when the kernel has it
}

// Allowlist is the Python policy layer (sandbox/pyrunner): which modules
// the program may import and what it may not call. It is policy and
// telemetry; the OS sandbox is the security boundary.
type Allowlist struct {
	Imports          []string `toml:"imports"`           // top-level module names; ["*"] allows every import
	DenyBuiltins     []string `toml:"deny_builtins"`     // builtins the program cannot use (see DenyableBuiltins)
	DenyEvents       []string `toml:"deny_events"`       // PEP 578 audit events refused at run time, e.g. "subprocess.Popen"
	StrictAttributes bool     `toml:"strict_attributes"` // refuse attribute names starting with "_" and modules reached as attributes unless allowed
}

// AllImports is the Allowlist.Imports entry that allows every module.
const AllImports = "*"

// DenyableBuiltins are the builtins a policy may deny.
var DenyableBuiltins = []string{"eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "vars", "globals", "locals", "open"}

// Audit configures the run's record in the audit log.
type Audit struct {
	StoreCode bool `toml:"store_code"` // keep the program's source in the log (its SHA-256 is always kept)
}

// Requirements are the protections a policy can require, in check order.
var Requirements = []string{"namespaces", "cgroups", "seccomp", "landlock"}

// Requires reports whether the policy lists req in sandbox.require.
func (p *Policy) Requires(req string) bool { return slices.Contains(p.Sandbox.Require, req) }

// Filesystem sizes the writable tmpfs mounts.
type Filesystem struct {
	TmpSize Size `toml:"tmp_size"` // size of the /tmp tmpfs, e.g. "64MiB"; allowed 1MiB..16GiB
	ShmSize Size `toml:"shm_size"` // size of the /dev/shm tmpfs, e.g. "16MiB"; allowed 1MiB..16GiB
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

//go:embed datasci.toml default.toml permissive.toml strict.toml
var builtinFS embed.FS

var builtinNames = []string{"datasci", "default", "permissive", "strict"}

// maxFileSize bounds what LoadFile reads, so a policy path such as /dev/zero
// fails fast instead of exhausting memory.
const maxFileSize = 1 << 20

// BuiltinNames returns the names of the shipped policies, sorted.
func BuiltinNames() []string { return slices.Clone(builtinNames) }

// Builtin returns a fresh copy of the shipped policy name.
func Builtin(name string) (*Policy, error) {
	if !slices.Contains(builtinNames, name) {
		return nil, fmt.Errorf("unknown built-in policy %q (built-ins: %s)", name, strings.Join(builtinNames, ", "))
	}
	data, err := builtinFS.ReadFile(name + ".toml")
	if err != nil {
		return nil, fmt.Errorf("read built-in policy %s: %w", name, err)
	}
	return parse(name, name+".toml", data)
}

// LoadFile reads and parses the policy file at path.
func LoadFile(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, readErr(path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, readErr(path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("read policy %s: larger than %s", path, Size(maxFileSize))
	}
	return parse(path, path, data)
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

// Parse parses and validates a policy. name becomes Policy.Name and is the
// file named in errors.
func Parse(name string, data []byte) (*Policy, error) {
	return parse(name, name, data)
}

// Resolve picks a built-in or a file. A value that contains '/' or names an
// existing regular file is a file; otherwise the name, with an optional
// ".toml" suffix stripped, must be a built-in ("strict.toml" means the
// built-in strict when no such file exists).
func Resolve(arg string) (*Policy, error) {
	if strings.Contains(arg, "/") {
		return LoadFile(arg)
	}
	if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		return LoadFile(arg)
	}
	name := strings.TrimSuffix(arg, ".toml")
	if !slices.Contains(builtinNames, name) {
		return nil, fmt.Errorf("unknown policy %q: not a file and not a built-in (built-ins: %s; give a path such as ./%s.toml for a file)",
			arg, strings.Join(builtinNames, ", "), name)
	}
	return Builtin(name)
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
	if o.Timeout != 0 {
		check("timeout", Duration{o.Timeout}, p.Limits.Timeout, o.Timeout > p.Limits.Timeout.Duration, o.Timeout < 0)
		if o.Timeout > 0 && o.Timeout < timeoutRange.min {
			errs = append(errs, fmt.Errorf("--timeout %v: %s", Duration{o.Timeout}, timeoutRange.problem(o.Timeout)))
		}
	}
	if o.OutputLimit != 0 {
		check("output-limit", Size(o.OutputLimit), p.Limits.OutputLimit, o.OutputLimit > int64(p.Limits.OutputLimit), o.OutputLimit < 0)
		if o.OutputLimit > 0 && Size(o.OutputLimit) < outputRange.min {
			errs = append(errs, fmt.Errorf("--output-limit %v: %s", Size(o.OutputLimit), outputRange.problem(Size(o.OutputLimit))))
		}
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
