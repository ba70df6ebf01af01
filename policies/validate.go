package policies

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// Ranges a policy file may choose from. The bounds keep a typo ("10h" for
// "10s", "1GiB" for "1MiB") from silently producing an unusable or abusive
// sandbox.
var (
	timeoutRange = durationRange{100 * time.Millisecond, 24 * time.Hour}
	outputRange  = sizeRange{kib, gib}
	tmpfsRange   = sizeRange{mib, 16 * gib}

	memoryRange    = sizeRange{16 * mib, 64 * gib}
	pidsRange      = intRange{4, 4096}
	cpusRange      = floatRange{0.1, 64}
	cpuTimeRange   = durationRange{time.Second, 24 * time.Hour}
	openFilesRange = intRange{16, 65536}
	fileSizeRange  = sizeRange{mib, 16 * gib}
	stackRange     = sizeRange{mib, gib}
)

// envName is an environment variable name. The policy regexps are
// compiled on first use, not at every start of the binary.
var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// reservedEnv lists names a policy may not set, with the reason.
var reservedEnv = map[string]string{
	"PATH":                    "nsbox sets it itself",
	"HOME":                    "nsbox sets it itself",
	"LANG":                    "nsbox sets it itself",
	"PYTHONDONTWRITEBYTECODE": "nsbox sets it itself",
	"PYTHONUNBUFFERED":        "nsbox sets it itself",
	"OMP_NUM_THREADS":         "nsbox sets it from limits.cpus",
	"OPENBLAS_NUM_THREADS":    "nsbox sets it from limits.cpus",
	"MKL_NUM_THREADS":         "nsbox sets it from limits.cpus",
	"PYTHONPATH":              "it would change which code Python runs",
	"PYTHONHOME":              "it would change which code Python runs",
	"PYTHONSTARTUP":           "it would change which code Python runs",
	"PYTHONINSPECT":           "it would change which code Python runs",
	"LD_PRELOAD":              "it would change which code the dynamic loader runs",
	"LD_LIBRARY_PATH":         "it would change which code the dynamic loader runs",
	"LD_AUDIT":                "it would change which code the dynamic loader runs",
}

// validate checks the values of a decoded policy. Errors name file and the
// line that line returns for the key (a toml.Key string); 0 means unknown.
func (p *Policy) validate(file string, line func(string) int) error {
	at := func(key, format string, args ...any) error {
		return &Error{File: file, Line: line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if r := p.Python.Root; !slices.Contains(BuiltinRoots, r) {
		if !strings.HasPrefix(r, "/") {
			return at("python.root", "%q is not a built-in root or an absolute path (allowed: %s)", r, allowed()["python.root"])
		}
		if msg := hostPathProblem(r); msg != "" {
			return at("python.root", "%s (allowed: %s)", msg, allowed()["python.root"])
		}
		if r == "/" {
			return at("python.root", `"/" is the host's own root, not a built root (allowed: %s)`, allowed()["python.root"])
		}
	}
	if v := p.Python.Verify; v != VerifyQuick && v != VerifyFull {
		return at("python.verify", "%q is not a verification level (allowed: %s)", v, allowed()["python.verify"])
	}
	if msg := timeoutRange.problem(p.Limits.Timeout.Duration); msg != "" {
		return at("limits.timeout", "%s", msg)
	}
	if msg := cpuTimeRange.problem(p.Limits.CPUTime.Duration); msg != "" {
		return at("limits.cpu_time", "%s", msg)
	}
	if p.Limits.CPUTime.Duration%time.Second != 0 {
		return at("limits.cpu_time", "%s is not a whole number of seconds; RLIMIT_CPU counts seconds (allowed: %s)", p.Limits.CPUTime, allowed()["limits.cpu_time"])
	}
	if msg := pidsRange.problem(p.Limits.Pids); msg != "" {
		return at("limits.pids", "%s", msg)
	}
	if msg := openFilesRange.problem(p.Limits.OpenFiles); msg != "" {
		return at("limits.open_files", "%s", msg)
	}
	if msg := cpusRange.problem(p.Limits.CPUs); msg != "" {
		return at("limits.cpus", "%s", msg)
	}
	for _, c := range []struct {
		key string
		v   Size
		r   sizeRange
	}{
		{"limits.output_limit", p.Limits.OutputLimit, outputRange},
		{"limits.memory", p.Limits.Memory, memoryRange},
		{"limits.file_size", p.Limits.FileSize, fileSizeRange},
		{"limits.stack", p.Limits.Stack, stackRange},
		{"filesystem.tmp_size", p.Filesystem.TmpSize, tmpfsRange},
		{"filesystem.shm_size", p.Filesystem.ShmSize, tmpfsRange},
	} {
		if msg := c.r.problem(c.v); msg != "" {
			return at(c.key, "%s", msg)
		}
	}
	if err := p.validateSandbox(at); err != nil {
		return err
	}
	if err := p.validateAllowlist(at); err != nil {
		return err
	}
	for _, name := range sortedKeys(p.Env) {
		key := toml.Key{"env", name}.String()
		switch {
		case !envName().MatchString(name):
			return at(key, "%q is not a valid variable name (allowed: names matching %s)", name, envName())
		case reservedEnv[name] != "":
			return at(key, "%s is reserved: %s (allowed: any valid name except %s)", name, reservedEnv[name], strings.Join(sortedKeys(reservedEnv), ", "))
		case strings.ContainsRune(p.Env[name], 0):
			return at(key, "value contains a NUL byte (allowed: any string without NUL)")
		}
	}
	return nil
}

// hostPathProblem describes what is wrong with a host path, or returns "".
// Existence is not checked: the path belongs to the host the sandbox runs
// on, which need not be the host that validates the policy.
func hostPathProblem(p string) string {
	switch {
	case strings.ContainsRune(p, 0):
		return fmt.Sprintf("%q contains a NUL byte", p)
	case !filepath.IsAbs(p):
		return fmt.Sprintf("%q is not an absolute path", p)
	case filepath.Clean(p) != p:
		return fmt.Sprintf("%q is not clean; write %q", p, filepath.Clean(p))
	}
	return ""
}

type durationRange struct{ min, max time.Duration }

func (r durationRange) String() string { return fmtDuration(r.min) + ".." + fmtDuration(r.max) }

func (r durationRange) problem(v time.Duration) string {
	return rangeProblem(v < r.min, v > r.max, fmtDuration(v), fmtDuration(r.min), fmtDuration(r.max), r.String())
}

type sizeRange struct{ min, max Size }

func (r sizeRange) String() string { return r.min.String() + ".." + r.max.String() }

func (r sizeRange) problem(v Size) string {
	return rangeProblem(v < r.min, v > r.max, v.String(), r.min.String(), r.max.String(), r.String())
}

func rangeProblem(below, above bool, v, lo, hi, allowed string) string {
	switch {
	case below:
		return fmt.Sprintf("%s is below the minimum %s (allowed: %s)", v, lo, allowed)
	case above:
		return fmt.Sprintf("%s exceeds the maximum %s (allowed: %s)", v, hi, allowed)
	}
	return ""
}

// validateSandbox checks [sandbox]: known, distinct requirements, a seccomp
// setting that names something, and no requirement of a protection the
// policy itself switches off.
func (p *Policy) validateSandbox(at func(key, format string, args ...any) error) error {
	seen := map[string]bool{}
	for i, r := range p.Sandbox.Require {
		switch {
		case !slices.Contains(Requirements, r):
			return at("sandbox.require", "element %d: unknown requirement %q (allowed: %s)", i+1, r, allowed()["sandbox.require"])
		case seen[r]:
			return at("sandbox.require", "element %d: %q is listed twice (allowed: %s)", i+1, r, allowed()["sandbox.require"])
		}
		seen[r] = true
	}
	sc := p.Sandbox.Seccomp
	switch {
	case sc == "none", slices.Contains(seccompprofiles.Names(), sc):
	case strings.HasPrefix(sc, "/"):
		if msg := hostPathProblem(sc); msg != "" {
			return at("sandbox.seccomp", "%s (allowed: %s)", msg, allowed()["sandbox.seccomp"])
		}
	default:
		return at("sandbox.seccomp", "%q is not a built-in profile or an absolute path (allowed: %s)", sc, allowed()["sandbox.seccomp"])
	}
	if sc == "none" && seen["seccomp"] {
		return at("sandbox.seccomp", `"none" contradicts sandbox.require, which lists "seccomp" (allowed: a profile, or drop "seccomp" from require)`)
	}
	if !p.Sandbox.Landlock && seen["landlock"] {
		return at("sandbox.landlock", `false contradicts sandbox.require, which lists "landlock" (allowed: true, or drop "landlock" from require)`)
	}
	return nil
}

type intRange struct{ min, max int64 }

func (r intRange) String() string { return fmt.Sprintf("%d..%d", r.min, r.max) }

func (r intRange) problem(v int64) string {
	return rangeProblem(v < r.min, v > r.max, fmt.Sprint(v), fmt.Sprint(r.min), fmt.Sprint(r.max), r.String())
}

type floatRange struct{ min, max float64 }

func (r floatRange) String() string { return fmt.Sprintf("%g..%g", r.min, r.max) }

func (r floatRange) problem(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprintf("%g is not a finite number (allowed: %s)", v, r)
	}
	return rangeProblem(v < r.min, v > r.max, fmt.Sprint(v), fmt.Sprint(r.min), fmt.Sprint(r.max), r.String())
}

// moduleName is a top-level Python module name.
var moduleName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// eventName is a PEP 578 audit event name such as "subprocess.Popen".
var eventName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`) })

// validateAllowlist checks [allowlist]: module names (or "*" alone),
// known builtins and well-formed event names, none twice.
func (p *Policy) validateAllowlist(at func(key, format string, args ...any) error) error {
	a := p.Allowlist
	for i, m := range a.Imports {
		switch {
		case m == AllImports && len(a.Imports) != 1:
			return at("allowlist.imports", `element %d: "*" allows every module and must be the only entry (allowed: %s)`, i+1, allowed()["allowlist.imports"])
		case m != AllImports && !moduleName().MatchString(m):
			return at("allowlist.imports", "element %d: %q is not a top-level module name (allowed: %s)", i+1, m, allowed()["allowlist.imports"])
		case slices.Index(a.Imports, m) != i:
			return at("allowlist.imports", "element %d: %q is listed twice", i+1, m)
		}
	}
	for i, b := range a.DenyBuiltins {
		switch {
		case !slices.Contains(DenyableBuiltins, b):
			return at("allowlist.deny_builtins", "element %d: %q cannot be denied (allowed: %s)", i+1, b, allowed()["allowlist.deny_builtins"])
		case slices.Index(a.DenyBuiltins, b) != i:
			return at("allowlist.deny_builtins", "element %d: %q is listed twice", i+1, b)
		}
	}
	for i, e := range a.DenyEvents {
		switch {
		case !eventName().MatchString(e):
			return at("allowlist.deny_events", "element %d: %q is not an audit event name (allowed: %s)", i+1, e, allowed()["allowlist.deny_events"])
		case slices.Index(a.DenyEvents, e) != i:
			return at("allowlist.deny_events", "element %d: %q is listed twice", i+1, e)
		}
	}
	return nil
}

// AllowsEverything reports whether the policy's import allowlist is "*".
func (a Allowlist) AllowsEverything() bool {
	return len(a.Imports) == 1 && a.Imports[0] == AllImports
}
