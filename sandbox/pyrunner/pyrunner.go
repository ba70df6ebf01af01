package pyrunner

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// Source is the runner as it ships: the modules of runner/ bundled into
// one file by internal/bundle.
//
//go:generate go run ./internal/bundle -o runner.py runner
//go:embed runner.py
var Source string

// Exit codes of the runner besides the program's own. ExitPolicyViolation
// and ExitSyntaxError reach the runner through its config;
// ExitRunnerError, needed before the config is read, is mirrored in the
// runner's source (EXIT_RUNNER), and a test keeps the two equal.
const (
	// ExitPolicyViolation: the static check found violations; nothing ran.
	ExitPolicyViolation = 126
	// ExitRunnerError: the config or the report fd was unusable (a bug in
	// the caller); nothing ran and no status line was written.
	ExitRunnerError = 125
	// ExitSyntaxError: the program does not compile. An uncaught exception
	// also exits 1; the report's status line tells them apart.
	ExitSyntaxError = 1
)

// MaxViolationLines bounds the violation lines of each phase (static, run
// time), so that a report cannot fill the pipe. The runner gets it through
// its config.
const MaxViolationLines = 1000

// The modes of Config.Mode.
const (
	ModeRun     = "run"     // check statically, then run
	ModeCheck   = "check"   // static check only
	ModeSession = "session" // read cells from stdin, check and run each (session.go)
)

// Bounds of Config.MaxOutputBytes: the default when it is 0, and the most
// a caller may ask for. A report line carrying outputs is bounded by the
// cap plus a fixed slack (lineLimit), so the cap is also what a reader of
// the report may have to hold for one line.
const (
	DefaultMaxOutputBytes = 4 << 20
	MaxOutputBytesCeiling = 64 << 20
)

// DefaultFilename is the program's name in tracebacks when Config.Filename
// is empty.
const DefaultFilename = "<program>"

// DenyableBuiltins are the names Config.DenyBuiltins may hold. The runner
// denies whichever builtins its config names.
var DenyableBuiltins = []string{
	"eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
	"vars", "globals", "locals", "open",
}

// Config is what the caller decides about a run of the runner; it reaches
// the runner as one JSON argv element, with the protocol's constants
// (wireConfig). Mode, ReportFD and WritableDirs are required; the zero
// value of each other field is the laxest choice. The shipped lists
// (allowlists.go) give the policies' values.
type Config struct {
	// Mode is ModeRun or ModeCheck.
	Mode string `json:"mode"`
	// Allow lists the top-level module names the program may import. Nil
	// (JSON null) turns import checks off entirely; an empty non-nil list
	// allows nothing but __future__.
	Allow []string `json:"allow"`
	// DenyBuiltins are builtins the program may not use, from
	// DenyableBuiltins. "open" denies opening for writing outside
	// WritableDirs; reading stays allowed.
	DenyBuiltins []string `json:"deny_builtins"`
	// DenyEvents are PEP 578 audit events refused with PermissionError
	// while the program runs, e.g. "subprocess.Popen", "os.system".
	DenyEvents []string `json:"deny_events"`
	// StrictAttrs rejects underscore attributes statically and hands
	// modules over as views that refuse modules the allowlist refuses.
	StrictAttrs bool `json:"strict_attrs"`
	// PythonMode is PythonGuarded ("" means it too) or PythonRestricted:
	// the program compiled by RestrictedPython, its attribute reads and
	// writes, item access and iteration through the runner's guards
	// (runner/restricted.py). Restricted needs StrictAttrs.
	PythonMode string `json:"python_mode,omitempty"`
	// ReportFD is the fd of the report pipe in the runner, >= 3.
	ReportFD int `json:"report_fd"`
	// Filename is the program's name in tracebacks; "" is DefaultFilename.
	Filename string `json:"filename"`
	// WritableDirs are the absolute directories the OS sandbox lets the
	// program write in; required. A denied "open" still writes there, and
	// code loaded from there counts as the program's own.
	WritableDirs []string `json:"writable_dirs"`

	// The fields below are left out of a plan's JSON when zero; the
	// runner always gets them (wireConfig).

	// Outputs asks for display outputs (ModeRun after the program,
	// ModeSession after every cell): a final bare expression's value,
	// matplotlib figures left open.
	Outputs bool `json:"outputs,omitempty"`
	// Preload lists modules the runner imports as its own, before the
	// audit hook and before the program (ModeRun, before reading it;
	// ModeSession, before the first cell). Each must be allowed by Allow.
	Preload []string `json:"preload,omitempty"`
	// MaxOutputBytes caps the encoded size of one run's or one cell's
	// display outputs; past it the rest are dropped and marked truncated.
	// 0 is DefaultMaxOutputBytes; at most MaxOutputBytesCeiling.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// RestrictedLib is the directory the runner imports RestrictedPython
	// from under PythonRestricted; "" is the root's, LibDir(). Tests of
	// the runner outside a root set their own.
	RestrictedLib string `json:"restricted_lib,omitempty"`
	// Proxy is the address of nsbox's proxy in the run's network
	// namespace, "127.0.0.1:PORT" (policy network.mode "allowlist"), or
	// "" for a run without network. When set, the runner refuses and
	// reports (KindNetwork) every route around it: a TCP connect to
	// another address, a datagram, a name lookup of another host, a new
	// AF_INET or AF_INET6 socket that is not a stream (runner/network.py).
	Proxy string `json:"proxy,omitempty"`
}

// wireConfig is the runner's config argument: Config and the constants of
// the protocol, which a caller does not choose.
type wireConfig struct {
	Config
	// Config's omitempty fields, always sent (these shadow them).
	Outputs             bool     `json:"outputs"`
	Preload             []string `json:"preload"`
	MaxOutputBytes      int64    `json:"max_output_bytes"`
	Proxy               *string  `json:"proxy"` // null without network
	PythonMode          string   `json:"python_mode"`
	RestrictedLib       string   `json:"restricted_lib"` // "" when guarded
	MaxViolationLines   int      `json:"max_violation_lines"`
	ExitPolicyViolation int      `json:"exit_policy_violation"`
	ExitSyntaxError     int      `json:"exit_syntax_error"`
}

// The runner's modes of holding the program's Python (Config.PythonMode;
// the policy's python.mode).
const (
	PythonGuarded    = "guarded"
	PythonRestricted = "restricted"
)

// Validate reports the first problem with c, naming the field.
func (c Config) Validate() error {
	if c.PythonMode != "" && c.PythonMode != PythonGuarded && c.PythonMode != PythonRestricted {
		return fmt.Errorf("pyrunner config: python_mode %q: want %q or %q", c.PythonMode, PythonGuarded, PythonRestricted)
	}
	if c.PythonMode == PythonRestricted && !c.StrictAttrs {
		return errors.New("pyrunner config: python_mode \"restricted\" needs strict_attrs")
	}
	if c.RestrictedLib != "" && !filepath.IsAbs(c.RestrictedLib) {
		return fmt.Errorf("pyrunner config: restricted_lib %q is not absolute", c.RestrictedLib)
	}
	if c.Mode != ModeRun && c.Mode != ModeCheck && c.Mode != ModeSession {
		return fmt.Errorf("pyrunner config: mode %q: want %q, %q or %q", c.Mode, ModeRun, ModeCheck, ModeSession)
	}
	for _, m := range c.Allow {
		if !isModuleName(m) {
			return fmt.Errorf("pyrunner config: allow: %q is not a top-level module name", m)
		}
	}
	for _, b := range c.DenyBuiltins {
		if !slices.Contains(DenyableBuiltins, b) {
			return fmt.Errorf("pyrunner config: deny_builtins: %q is not one of %s",
				b, strings.Join(DenyableBuiltins, ", "))
		}
	}
	for _, e := range c.DenyEvents {
		if e == "" || strings.TrimSpace(e) != e {
			return fmt.Errorf("pyrunner config: deny_events: %q is not an audit event name", e)
		}
	}
	if c.ReportFD < 3 {
		return fmt.Errorf("pyrunner config: report_fd %d: want an inherited fd >= 3", c.ReportFD)
	}
	if len(c.WritableDirs) == 0 {
		return errors.New("pyrunner config: writable_dirs: required (where the sandbox lets the program write)")
	}
	for _, d := range c.WritableDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("pyrunner config: writable_dirs: %q is not absolute", d)
		}
	}
	if strings.ContainsRune(c.Filename, 0) {
		return errors.New("pyrunner config: filename contains NUL")
	}
	if len(c.Preload) > 0 && c.Mode == ModeCheck {
		return errors.New("pyrunner config: preload: nothing runs in mode check")
	}
	for _, m := range c.Preload {
		// A dotted name is fine (matplotlib.pyplot); its top level must be
		// allowed, or the runner would hold a module the program may not.
		parts := strings.Split(m, ".")
		top := parts[0]
		if slices.ContainsFunc(parts, func(p string) bool { return !isModuleName(p) }) {
			return fmt.Errorf("pyrunner config: preload: %q is not a module name", m)
		}
		if c.Allow != nil && !slices.Contains(c.Allow, top) {
			return fmt.Errorf("pyrunner config: preload: %q is not allowed by allow", m)
		}
	}
	if c.Proxy != "" {
		// The runner compares addresses as the program passes them, so the
		// proxy's must be the one spelling Python's socket uses.
		ap, err := netip.ParseAddrPort(c.Proxy)
		if err != nil || !ap.Addr().Is4() || !ap.Addr().IsLoopback() || ap.Port() == 0 || ap.String() != c.Proxy {
			return fmt.Errorf("pyrunner config: proxy %q: want a loopback IPv4 address and port, such as \"127.0.0.1:3128\"", c.Proxy)
		}
	}
	if c.MaxOutputBytes < 0 || c.MaxOutputBytes > MaxOutputBytesCeiling {
		return fmt.Errorf("pyrunner config: max_output_bytes %d: want 0 (the default, %d) to %d",
			c.MaxOutputBytes, DefaultMaxOutputBytes, MaxOutputBytesCeiling)
	}
	return nil
}

// maxOutputBytes is c's cap on display outputs, the default for 0.
func (c Config) maxOutputBytes() int64 {
	if c.MaxOutputBytes == 0 {
		return DefaultMaxOutputBytes
	}
	return c.MaxOutputBytes
}

// isModuleName reports whether s is a Python identifier in ASCII (every
// standard and vetted top-level module name is).
func isModuleName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// flags are the interpreter's options: -S (no site: the runner does site's
// work for nsbox's venv itself, cheaper, and runs the real site.main()
// for any other layout), -s (no user site-packages), -P (no script
// directory, here the compiled runner's, in sys.path).
var flags = []string{"-S", "-s", "-P"}

// Argv returns the interpreter's command line for c, with pyc the
// root's compiled runner (CompiledPath):
// [interp, "-S", "-s", "-P", pyc, <config JSON>].
func Argv(interp, pyc string, c Config) ([]string, error) {
	if pyc == "" {
		return nil, errors.New("pyrunner: no compiled runner")
	}
	cfg, err := encodeConfig(interp, c)
	if err != nil {
		return nil, err
	}
	return append(append([]string{interp}, flags...), pyc, cfg), nil
}

// encodeConfig validates c and encodes it as the runner's one argument.
func encodeConfig(interp string, c Config) (string, error) {
	if interp == "" {
		return "", errors.New("pyrunner: no interpreter")
	}
	if err := c.Validate(); err != nil {
		return "", err
	}
	if c.Filename == "" {
		c.Filename = DefaultFilename
	}
	w := wireConfig{Config: c, Outputs: c.Outputs, Preload: c.Preload, MaxOutputBytes: c.maxOutputBytes(),
		MaxViolationLines: MaxViolationLines, ExitPolicyViolation: ExitPolicyViolation, ExitSyntaxError: ExitSyntaxError}
	if w.Preload == nil {
		w.Preload = []string{} // a list, as the runner requires
	}
	if c.Proxy != "" {
		w.Proxy = &c.Proxy
	}
	w.PythonMode = PythonGuarded
	if c.PythonMode == PythonRestricted {
		w.PythonMode, w.RestrictedLib = PythonRestricted, c.RestrictedLib
		if w.RestrictedLib == "" {
			w.RestrictedLib = LibDir()
		}
	}
	var cfg strings.Builder
	enc := json.NewEncoder(&cfg)
	enc.SetEscapeHTML(false)              // "<program>" stays readable in ps
	if err := enc.Encode(w); err != nil { // strings, bools and ints always encode
		return "", fmt.Errorf("pyrunner: bug: encode config: %w", err)
	}
	return strings.TrimSuffix(cfg.String(), "\n"), nil
}
