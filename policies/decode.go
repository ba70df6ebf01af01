package policies

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// The schema. Every key is required except description and [env]: a policy
// states all of its limits, so nothing depends on a default hidden in code.
var (
	topKeys     = []string{"description", "python", "limits", "filesystem", "sandbox", "allowlist", "audit", "env"}
	sectionKeys = map[string][]string{
		"python":     {"root", "verify"},
		"limits":     {"timeout", "output_limit", "memory", "pids", "cpus", "cpu_time", "open_files", "file_size", "stack"},
		"filesystem": {"tmp_size", "shm_size"},
		"sandbox":    {"require", "seccomp", "landlock"},
		"allowlist":  {"imports", "deny_builtins", "deny_events", "strict_attributes"},
		"audit":      {"store_code"},
	}
	sectionOrder = []string{"python", "limits", "filesystem", "sandbox", "allowlist", "audit"}

	// allowed is the "(allowed: ...)" text for each leaf key. Built on
	// first use: it formats every range and lists the embedded seccomp
	// profiles, work that only policy errors need and that would otherwise
	// run at every start of the binary (twice per sandboxed run).
	allowed = sync.OnceValue(func() map[string]string {
		return map[string]string{
			"description":                 "any string",
			"python.root":                 `a built-in root (` + strings.Join(BuiltinRoots, ", ") + `) or the absolute, clean path of a root built by "nsbox rootfs build"`,
			"python.verify":               `"quick" (the manifest and critical files, every run) or "full" (re-hash every file first)`,
			"limits.timeout":              timeoutRange.String(),
			"limits.output_limit":         outputRange.String(),
			"limits.memory":               memoryRange.String(),
			"limits.pids":                 pidsRange.String(),
			"limits.cpus":                 cpusRange.String(),
			"limits.cpu_time":             cpuTimeRange.String() + " in whole seconds",
			"limits.open_files":           openFilesRange.String(),
			"limits.file_size":            fileSizeRange.String(),
			"limits.stack":                stackRange.String(),
			"filesystem.tmp_size":         tmpfsRange.String(),
			"filesystem.shm_size":         tmpfsRange.String(),
			"sandbox.require":             `an array of distinct names from ` + strings.Join(Requirements, ", "),
			"sandbox.seccomp":             `"none", a built-in profile (` + strings.Join(seccompprofiles.Names(), ", ") + `) or an absolute, clean path to an OCI seccomp JSON file`,
			"sandbox.landlock":            "true or false",
			"allowlist.imports":           `an array of top-level module names such as ["math", "json"], or ["*"] for every module`,
			"allowlist.deny_builtins":     "an array of distinct names from " + strings.Join(DenyableBuiltins, ", "),
			"allowlist.deny_events":       `an array of PEP 578 audit event names such as ["subprocess.Popen", "socket.connect"]`,
			"allowlist.strict_attributes": "true or false",
			"audit.store_code":            "true or false",
		}
	})
	// example is a line to paste when a required key is missing.
	example = map[string]string{
		"python.root":                 `root = "base"`,
		"python.verify":               `verify = "quick"`,
		"limits.timeout":              `timeout = "30s"`,
		"limits.output_limit":         `output_limit = "1MiB"`,
		"limits.memory":               `memory = "512MiB"`,
		"limits.pids":                 `pids = 64`,
		"limits.cpus":                 `cpus = 1.0`,
		"limits.cpu_time":             `cpu_time = "30s"`,
		"limits.open_files":           `open_files = 1024`,
		"limits.file_size":            `file_size = "64MiB"`,
		"limits.stack":                `stack = "8MiB"`,
		"filesystem.tmp_size":         `tmp_size = "64MiB"`,
		"filesystem.shm_size":         `shm_size = "16MiB"`,
		"sandbox.require":             `require = ["namespaces", "cgroups", "seccomp"]`,
		"sandbox.seccomp":             `seccomp = "default"`,
		"sandbox.landlock":            `landlock = true`,
		"allowlist.imports":           `imports = ["math", "json"]`,
		"allowlist.deny_builtins":     `deny_builtins = ["eval", "exec"]`,
		"allowlist.deny_events":       `deny_events = ["subprocess.Popen"]`,
		"allowlist.strict_attributes": `strict_attributes = false`,
		"audit.store_code":            `store_code = false`,
	}
)

// decoder turns one parsed document into a Policy, producing *Error values
// that point at the offending line.
type decoder struct {
	file  string
	src   string
	tree  map[string]any
	lines map[string]int // from keyLines, computed on the first error
}

func parse(name, file string, data []byte) (*Policy, error) {
	d := &decoder{file: file, src: string(data)}
	md, err := toml.Decode(d.src, &d.tree)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: file, Line: pe.Position.Line,
				Msg: fmt.Sprintf("invalid TOML at column %d: %s", pe.Position.Col, pe.Message)}
		}
		return nil, &Error{File: file, Msg: "invalid TOML: " + err.Error()}
	}
	if err := d.checkKeys(md.Keys()); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	p := &Policy{Name: name, Env: map[string]string{}, SHA256: hex.EncodeToString(sum[:])}
	if err := d.fill(p); err != nil {
		return nil, err
	}
	if err := p.validate(d.file, d.line); err != nil {
		return nil, err
	}
	return p, nil
}

// checkKeys rejects, in document order, the first key the schema does not
// know. It matches names exactly: toml.MetaData.Undecoded would accept
// "Timeout" for "timeout" because the library folds case when it fills
// struct fields, so unknown keys are found against md.Keys() instead.
func (d *decoder) checkKeys(keys []toml.Key) error {
	for _, k := range keys {
		if !slices.Contains(topKeys, k[0]) {
			return d.unknown(k[:1], topKeys)
		}
		if known := sectionKeys[k[0]]; len(k) > 1 && known != nil && !slices.Contains(known, k[1]) {
			return d.unknown(k[:2], known)
		}
		// Deeper keys (limits.timeout.x, env.A.B) are type errors, reported
		// by fill with the expected type.
	}
	return nil
}

func (d *decoder) unknown(k toml.Key, known []string) error {
	where := "at the top level"
	if len(k) > 1 {
		where = "in [" + k[0] + "]"
	}
	kind := "key"
	if _, ok := d.lookup(k).(map[string]any); ok {
		kind = "table"
	}
	msg := fmt.Sprintf("unknown %s%s (allowed %s: %s)", kind, d.suggest(k, known), where, strings.Join(known, ", "))
	return d.errorf(k.String(), "%s", msg)
}

// fill copies the document into p, checking that each required key is
// present and has the right TOML type. Ranges are left to validate.
func (d *decoder) fill(p *Policy) error {
	if v, ok := d.tree["description"]; ok {
		s, ok := v.(string)
		if !ok {
			return d.typeErr("description", v, "a string")
		}
		p.Description = s
	}
	for _, sec := range append(slices.Clone(sectionOrder), "env") {
		if v, ok := d.tree[sec]; ok {
			if _, ok := v.(map[string]any); !ok {
				want := "a [" + sec + "] table with " + strings.Join(sectionKeys[sec], ", ")
				if sec == "env" {
					want = `an [env] table of NAME = "value" entries`
				}
				return d.errorf(sec, "must be a table, not %s (allowed: %s)", tomlType(v), want)
			}
		}
	}
	for _, sec := range sectionOrder {
		for _, k := range sectionKeys[sec] {
			key := sec + "." + k
			if d.lookup(toml.Key{sec, k}) == nil {
				return &Error{File: d.file, Line: d.line(sec), Key: key, Msg: fmt.Sprintf(
					"missing required key; policies have no hidden defaults, so add e.g. %s under [%s] (allowed: %s)",
					example[key], sec, allowed()[key])}
			}
		}
	}

	var err error
	py, lim, fs, sb := d.tree["python"].(map[string]any), d.tree["limits"].(map[string]any),
		d.tree["filesystem"].(map[string]any), d.tree["sandbox"].(map[string]any)
	al, au := d.tree["allowlist"].(map[string]any), d.tree["audit"].(map[string]any)
	if p.Allowlist.Imports, err = d.strs("allowlist.imports", al["imports"]); err != nil {
		return err
	}
	if p.Allowlist.DenyBuiltins, err = d.strs("allowlist.deny_builtins", al["deny_builtins"]); err != nil {
		return err
	}
	if p.Allowlist.DenyEvents, err = d.strs("allowlist.deny_events", al["deny_events"]); err != nil {
		return err
	}
	if p.Allowlist.StrictAttributes, err = d.boolean("allowlist.strict_attributes", al["strict_attributes"]); err != nil {
		return err
	}
	if p.Audit.StoreCode, err = d.boolean("audit.store_code", au["store_code"]); err != nil {
		return err
	}
	if p.Python.Root, err = d.str("python.root", py["root"]); err != nil {
		return err
	}
	if p.Python.Verify, err = d.str("python.verify", py["verify"]); err != nil {
		return err
	}
	if p.Limits.Timeout, err = d.duration("limits.timeout", lim["timeout"]); err != nil {
		return err
	}
	if p.Limits.OutputLimit, err = d.size("limits.output_limit", lim["output_limit"]); err != nil {
		return err
	}
	if p.Limits.Memory, err = d.size("limits.memory", lim["memory"]); err != nil {
		return err
	}
	if p.Limits.Pids, err = d.integer("limits.pids", lim["pids"]); err != nil {
		return err
	}
	if p.Limits.CPUs, err = d.number("limits.cpus", lim["cpus"]); err != nil {
		return err
	}
	if p.Limits.CPUTime, err = d.duration("limits.cpu_time", lim["cpu_time"]); err != nil {
		return err
	}
	if p.Limits.OpenFiles, err = d.integer("limits.open_files", lim["open_files"]); err != nil {
		return err
	}
	if p.Limits.FileSize, err = d.size("limits.file_size", lim["file_size"]); err != nil {
		return err
	}
	if p.Limits.Stack, err = d.size("limits.stack", lim["stack"]); err != nil {
		return err
	}
	if p.Sandbox.Require, err = d.strs("sandbox.require", sb["require"]); err != nil {
		return err
	}
	if p.Sandbox.Seccomp, err = d.str("sandbox.seccomp", sb["seccomp"]); err != nil {
		return err
	}
	if p.Sandbox.Landlock, err = d.boolean("sandbox.landlock", sb["landlock"]); err != nil {
		return err
	}
	if p.Filesystem.TmpSize, err = d.size("filesystem.tmp_size", fs["tmp_size"]); err != nil {
		return err
	}
	if p.Filesystem.ShmSize, err = d.size("filesystem.shm_size", fs["shm_size"]); err != nil {
		return err
	}
	env, _ := d.tree["env"].(map[string]any)
	for _, name := range sortedKeys(env) {
		key := toml.Key{"env", name}.String()
		s, ok := env[name].(string)
		if !ok {
			return d.typeErr(key, env[name], "a string")
		}
		p.Env[name] = s
	}
	return nil
}

func (d *decoder) str(key string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", d.typeErr(key, v, "a string")
	}
	return s, nil
}

func (d *decoder) integer(key string, v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, d.typeErr(key, v, "an integer")
	}
	return n, nil
}

// number accepts a TOML float or integer ("cpus = 1" and "cpus = 1.0").
func (d *decoder) number(key string, v any) (float64, error) {
	switch v := v.(type) {
	case float64:
		return v, nil
	case int64:
		return float64(v), nil
	}
	return 0, d.typeErr(key, v, "a number")
}

func (d *decoder) boolean(key string, v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, d.typeErr(key, v, "a boolean")
	}
	return b, nil
}

func (d *decoder) strs(key string, v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, d.typeErr(key, v, "an array of strings")
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, d.errorf(key, "element %d must be a string, not %s (allowed: %s)", i+1, tomlType(e), allowed()[key])
		}
		out = append(out, s)
	}
	return out, nil
}

func (d *decoder) duration(key string, v any) (Duration, error) {
	s, ok := v.(string)
	if !ok {
		return Duration{}, d.typeErr(key, v, `a duration string such as "30s"`)
	}
	t, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, d.errorf(key, `%q is not a duration (allowed: a duration such as "30s", "1m30s" or "500ms" in %s)`, s, allowed()[key])
	}
	return Duration{t}, nil
}

func (d *decoder) size(key string, v any) (Size, error) {
	switch v := v.(type) {
	case int64:
		return Size(v), nil
	case string:
		s, err := parseSize(v)
		if err != nil {
			return 0, d.errorf(key, "%v (allowed: %s; %s)", err, sizeSyntax, allowed()[key])
		}
		return s, nil
	}
	return 0, d.typeErr(key, v, `a size string such as "64KiB" or an integer number of bytes`)
}

func (d *decoder) typeErr(key string, v any, want string) error {
	return d.errorf(key, "must be %s, not %s (allowed: %s)", want, tomlType(v), or(allowed()[key], want))
}

// errorf builds an *Error for key (a toml.Key string) at the key's line.
func (d *decoder) errorf(key, format string, args ...any) error {
	return &Error{File: d.file, Line: d.line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// line returns the line where key (a toml.Key string) is written, or 0.
func (d *decoder) line(key string) int {
	if d.lines == nil {
		d.lines = keyLines(d.src)
	}
	return d.lines[key]
}

// lookup returns the value at k in the document, or nil.
func (d *decoder) lookup(k toml.Key) any {
	var v any = d.tree
	for _, part := range k {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
