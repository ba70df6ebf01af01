package policies

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Ranges a policy file may choose from. The bounds keep a typo ("10h" for
// "10s", "1GiB" for "1MiB") from silently producing an unusable or abusive
// sandbox.
var (
	timeoutRange = durationRange{100 * time.Millisecond, 24 * time.Hour}
	outputRange  = sizeRange{kib, gib}
	tmpfsRange   = sizeRange{mib, 16 * gib}
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv lists names a policy may not set, with the reason.
var reservedEnv = map[string]string{
	"PATH":                    "nsbox sets it itself",
	"HOME":                    "nsbox sets it itself",
	"LANG":                    "nsbox sets it itself",
	"PYTHONDONTWRITEBYTECODE": "nsbox sets it itself",
	"PYTHONUNBUFFERED":        "nsbox sets it itself",
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
	if msg := hostPathProblem(p.Python.Interpreter); msg != "" {
		return at("python.interpreter", "%s (allowed: %s)", msg, allowed["python.interpreter"])
	}
	for i, hp := range p.Python.HostPaths {
		if msg := hostPathProblem(hp); msg != "" {
			return at("python.host_paths", "element %d: %s (allowed: %s)", i+1, msg, allowed["python.host_paths"])
		}
		if hp == "/" {
			return at("python.host_paths", `element %d: "/" would expose the whole host filesystem (allowed: %s)`, i+1, allowed["python.host_paths"])
		}
	}
	if msg := timeoutRange.problem(p.Limits.Timeout.Duration); msg != "" {
		return at("limits.timeout", "%s", msg)
	}
	for _, c := range []struct {
		key string
		v   Size
		r   sizeRange
	}{
		{"limits.output_limit", p.Limits.OutputLimit, outputRange},
		{"filesystem.tmp_size", p.Filesystem.TmpSize, tmpfsRange},
		{"filesystem.shm_size", p.Filesystem.ShmSize, tmpfsRange},
	} {
		if msg := c.r.problem(c.v); msg != "" {
			return at(c.key, "%s", msg)
		}
	}
	for _, name := range sortedKeys(p.Env) {
		key := toml.Key{"env", name}.String()
		switch {
		case !envName.MatchString(name):
			return at(key, "%q is not a valid variable name (allowed: names matching %s)", name, envName)
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
