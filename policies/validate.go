package policies

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/nsbox/nsbox/sandbox/spec"
	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// validate checks the values of a decoded policy. Errors name file and the
// line that line returns for the key (a toml.Key string); 0 means unknown.
func (p *Policy) validate(file string, line func(string) int) error {
	return p.check(func(key, format string, args ...any) error {
		return &Error{File: file, Line: line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
	})
}

// check runs every key's checks in schema order and returns the first
// error: the range, each entry of a list and its duplicates, then the
// key's own check, which may look at other keys.
func (p *Policy) check(at reporter) error {
	for i := range schema {
		k := &schema[i]
		if k.field == nil {
			continue
		}
		// An optional key left out keeps its zero value, which its
		// range need not include (network.max_connections without
		// network); the key's own check decides when it is needed.
		if k.bounds != nil && (k.Required || !reflect.ValueOf(k.value(p)).IsZero()) {
			if msg := k.bounds.problem(k.value(p)); msg != "" {
				return at(k.Name, "%s", msg)
			}
		}
		if k.List() {
			if err := checkEntries(k, *k.field(p).(*[]string), k.Name, at); err != nil {
				return err
			}
		}
		if k.check != nil {
			if err := k.check(k, p, at); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEntries checks each entry of list, the value of k or of one of its
// _add and _remove forms (reported as key), and refuses duplicates.
func checkEntries(k *Key, list []string, key string, at reporter) error {
	seen := make(map[string]bool, len(list))
	for i, e := range list {
		if k.elem != nil {
			if msg := k.elem(k, e); msg != "" {
				return at(key, "element %d: %s", i+1, msg)
			}
		}
		if seen[e] {
			return at(key, "element %d: %q is listed twice", i+1, e)
		}
		seen[e] = true
	}
	return nil
}

// The keys' own checks, referenced from the schema.

func checkRoot(k *Key, p *Policy, at reporter) error {
	r := p.Python.Root
	switch {
	case slices.Contains(BuiltinRoots, r):
	case !strings.HasPrefix(r, "/"):
		return at(k.Name, "%q is not a built-in root or an absolute path (allowed: %s)", r, k.Allowed())
	case hostPathProblem(r) != "":
		return at(k.Name, "%s (allowed: %s)", hostPathProblem(r), k.Allowed())
	case r == "/":
		return at(k.Name, `"/" is the host's own root, not a built root (allowed: %s)`, k.Allowed())
	}
	return nil
}

func checkOutputMode(k *Key, p *Policy, at reporter) error {
	if v := p.Limits.OutputMode; v != "" && !slices.Contains(k.values(), v) {
		return at(k.Name, "%q is not an output mode (allowed: %s)", v, k.Allowed())
	}
	return nil
}

func checkVerify(k *Key, p *Policy, at reporter) error {
	if v := p.Python.Verify; !slices.Contains(k.values(), v) {
		return at(k.Name, "%q is not a verification level (allowed: %s)", v, k.Allowed())
	}
	return nil
}

// checkMode: a known mode; restricted only with strict_attributes, whose
// module views and run-time checks the restricted guards build on.
func checkMode(k *Key, p *Policy, at reporter) error {
	v := p.Python.Mode
	if v != "" && !slices.Contains(k.values(), v) {
		return at(k.Name, "%q is not a mode (allowed: %s)", v, k.Allowed())
	}
	if v == ModeRestricted && !p.Allowlist.StrictAttributes {
		return at(k.Name, `"restricted" needs allowlist.strict_attributes = true, which is false (allowed: %s)`, k.Allowed())
	}
	return nil
}

func checkWholeSeconds(k *Key, p *Policy, at reporter) error {
	if d := p.Limits.CPUTime; d.Duration%time.Second != 0 {
		return at(k.Name, "%s is not a whole number of seconds; RLIMIT_CPU counts seconds (allowed: %s)", d, k.Allowed())
	}
	return nil
}

// checkWorkspaceSize: below limits.memory. The workspace's pages are the
// run's memory, so a workspace as large as the memory limit would end a
// run that fills it by the OOM killer instead of ENOSPC.
func checkWorkspaceSize(k *Key, p *Policy, at reporter) error {
	if ws, mem := p.Limits.WorkspaceSize, p.Limits.Memory; ws >= mem {
		return at(k.Name, "%s is not below limits.memory (%s), which the workspace's pages count against (allowed: %s, below limits.memory)", ws, mem, k.Allowed())
	}
	return nil
}

// checkSeccomp: a setting that names something, and not "none" when
// sandbox.require lists seccomp.
func checkSeccomp(k *Key, p *Policy, at reporter) error {
	sc := p.Sandbox.Seccomp
	switch {
	case sc == "none", slices.Contains(seccompprofiles.Names(), sc):
	case strings.HasPrefix(sc, "/"):
		if msg := hostPathProblem(sc); msg != "" {
			return at(k.Name, "%s (allowed: %s)", msg, k.Allowed())
		}
	default:
		return at(k.Name, "%q is not a built-in profile or an absolute path (allowed: %s)", sc, k.Allowed())
	}
	if sc == "none" && p.Requires("seccomp") {
		return at(k.Name, `"none" contradicts sandbox.require, which lists "seccomp" (allowed: a profile, or drop "seccomp" from require)`)
	}
	// Only the built-in profiles are known to refuse memfd_create (their
	// tests prove it); nsbox does not analyse a profile of your own.
	if !slices.Contains(seccompprofiles.Names(), sc) && p.Requires("memfd_noexec") {
		return at(k.Name, `%q contradicts sandbox.require, which lists "memfd_noexec" (allowed: a built-in profile (%s), which refuses memfd_create, or drop "memfd_noexec" from require)`,
			sc, strings.Join(seccompprofiles.Names(), ", "))
	}
	return nil
}

// checkLoopbackSockets: true only with a built-in seccomp profile (which
// has a loopback variant) or none (which refuses no socket anyway).
func checkLoopbackSockets(k *Key, p *Policy, at reporter) error {
	sc := p.Sandbox.Seccomp
	if p.Sandbox.LoopbackSockets && sc != "none" && !slices.Contains(seccompprofiles.Names(), sc) {
		return at(k.Name, `true needs a built-in seccomp profile or "none" in sandbox.seccomp, not %q: a profile of your own allows the sockets it names (allowed: false, or allow AF_INET and AF_INET6 in the profile)`, sc)
	}
	return nil
}

// checkNetworkMode: allowlist needs the sockets that reach the proxy
// (AF_INET stream sockets, which a built-in profile's proxy variant
// allows), and limits on what the proxy does for the program.
func checkNetworkMode(k *Key, p *Policy, at reporter) error {
	switch p.Network.Mode {
	case "", NetworkNone:
		return nil
	case NetworkAllowlist:
	default:
		return at(k.Name, "%q is not a network mode (allowed: %s)", p.Network.Mode, k.Allowed())
	}
	if sc := p.Sandbox.Seccomp; sc != "none" && !slices.Contains(seccompprofiles.Names(), sc) {
		return at(k.Name, `"allowlist" needs a built-in seccomp profile or "none" in sandbox.seccomp, not %q: a profile of your own decides which sockets exist (allowed: "none", or a built-in profile)`, sc)
	}
	if p.Sandbox.LoopbackSockets {
		return at(k.Name, `"allowlist" cannot be combined with sandbox.loopback_sockets = true: allowlist mode lets the program make the TCP sockets that reach the proxy and no others (allowed: one of the two)`)
	}
	if p.Network.MaxConnections == 0 {
		return at(k.Name, `"allowlist" needs network.max_connections (allowed: set it, such as max_connections = 32)`)
	}
	if p.Network.MaxBytes == 0 {
		return at(k.Name, `"allowlist" needs network.max_bytes (allowed: set it, such as max_bytes = "256MiB")`)
	}
	return nil
}

// checkLandlock: not false when sandbox.require lists landlock.
func checkLandlock(k *Key, p *Policy, at reporter) error {
	if !p.Sandbox.Landlock && p.Requires("landlock") {
		return at(k.Name, `false contradicts sandbox.require, which lists "landlock" (allowed: true, or drop "landlock" from require)`)
	}
	return nil
}

// checkImports: "*" only alone.
func checkImports(k *Key, p *Policy, at reporter) error {
	imports := p.Allowlist.Imports
	if i := slices.Index(imports, AllImports); i >= 0 && len(imports) != 1 {
		return at(k.Name, `element %d: "*" allows every module and must be the only entry (allowed: %s)`, i+1, k.Allowed())
	}
	return nil
}

// checkPreload refuses a preload module the import allowlist does not
// allow: the runner imports it before the hook, and the program would
// otherwise find loaded a module it may not import.
func checkPreload(k *Key, p *Policy, at reporter) error {
	if p.Allowlist.AllowsEverything() {
		return nil
	}
	for i, m := range p.Allowlist.Preload {
		top, _, _ := strings.Cut(m, ".")
		if !slices.Contains(p.Allowlist.Imports, top) {
			return at(k.Name, "element %d: %q is not allowed by allowlist.imports (allowed: %s)", i+1, top, k.Allowed())
		}
	}
	return nil
}

// reservedEnv lists names a policy may not set, with the reason: the
// environment nsbox gives every program (spec.BaseEnv, spec.ThreadEnv,
// spec.ProxyEnv),
// and the variables that would change what runs.
var reservedEnv = func() map[string]string {
	m := map[string]string{
		"PYTHONPATH":      "it would change which code Python runs",
		"PYTHONHOME":      "it would change which code Python runs",
		"PYTHONSTARTUP":   "it would change which code Python runs",
		"PYTHONINSPECT":   "it would change which code Python runs",
		"LD_PRELOAD":      "it would change which code the dynamic loader runs",
		"LD_LIBRARY_PATH": "it would change which code the dynamic loader runs",
		"LD_AUDIT":        "it would change which code the dynamic loader runs",
	}
	for _, kv := range spec.BaseEnv {
		name, _, _ := strings.Cut(kv, "=")
		m[name] = "nsbox sets it itself"
	}
	for _, name := range spec.ThreadEnv {
		m[name] = "nsbox sets it from limits.cpus"
	}
	for _, kv := range spec.ProxyEnv {
		name, _, _ := strings.Cut(kv, "=")
		m[name] = "nsbox sets it in network allowlist mode (its proxy)"
	}
	return m
}()

// checkEnv: valid names, none nsbox owns or that changes what runs, no NUL
// in a value. Errors name the variable: env.NAME.
func checkEnv(_ *Key, p *Policy, at reporter) error {
	for _, name := range sortedKeys(p.Env) {
		key := toml.Key{"env", name}.String()
		switch {
		case !isIdent(name, false):
			return at(key, "%q is not a valid variable name (allowed: names matching %s)", name, envNamePattern)
		case reservedEnv[name] != "":
			return at(key, "%s is reserved: %s (allowed: any valid name except %s)", name, reservedEnv[name], strings.Join(sortedKeys(reservedEnv), ", "))
		case strings.ContainsRune(p.Env[name], 0):
			return at(key, "value contains a NUL byte (allowed: any string without NUL)")
		}
	}
	return nil
}

// envNamePattern is what isIdent matches, for messages.
const envNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

// isIdent reports whether s matches envNamePattern, the form of an
// environment variable name and of a top-level Python module name; with
// dotted, dots may follow the first character (a PEP 578 audit event name
// such as "subprocess.Popen"). A loop, not a regexp: a policy's lists are
// checked at every run.
func isIdent(s string, dotted bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || dotted && c == '.'):
		default:
			return false
		}
	}
	return s != ""
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

// AllowsEverything reports whether the policy's import allowlist is "*".
func (a Allowlist) AllowsEverything() bool {
	return len(a.Imports) == 1 && a.Imports[0] == AllImports
}

// bounds is the range of a key's value. The bounds keep a typo ("10h" for
// "10s", "1GiB" for "1MiB") from silently producing an unusable or abusive
// sandbox.
type bounds interface {
	String() string // "100ms..24h"
	// problem describes v, of the key's Go type, when it is out of range,
	// ending in "(allowed: ...)"; "" when it is in range.
	problem(v any) string
}

type durationRange struct{ min, max time.Duration }

func (r durationRange) String() string { return fmtDuration(r.min) + ".." + fmtDuration(r.max) }

func (r durationRange) problem(v any) string {
	d := v.(Duration).Duration
	return rangeProblem(d < r.min, d > r.max, fmtDuration(d), fmtDuration(r.min), fmtDuration(r.max), r.String())
}

type sizeRange struct{ min, max Size }

func (r sizeRange) String() string { return r.min.String() + ".." + r.max.String() }

func (r sizeRange) problem(v any) string {
	s := v.(Size)
	return rangeProblem(s < r.min, s > r.max, s.String(), r.min.String(), r.max.String(), r.String())
}

type intRange struct{ min, max int64 }

func (r intRange) String() string { return fmt.Sprintf("%d..%d", r.min, r.max) }

func (r intRange) problem(v any) string {
	n := v.(int64)
	return rangeProblem(n < r.min, n > r.max, fmt.Sprint(n), fmt.Sprint(r.min), fmt.Sprint(r.max), r.String())
}

type floatRange struct{ min, max float64 }

func (r floatRange) String() string { return fmt.Sprintf("%g..%g", r.min, r.max) }

func (r floatRange) problem(v any) string {
	f := v.(float64)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprintf("%g is not a finite number (allowed: %s)", f, r)
	}
	return rangeProblem(f < r.min, f > r.max, fmt.Sprint(f), fmt.Sprint(r.min), fmt.Sprint(r.max), r.String())
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
