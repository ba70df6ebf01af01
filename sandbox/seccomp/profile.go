package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// maxProfileSize bounds what Load reads: far above any real profile (the
// built-in ones are a few percent of it), far below a memory problem.
const maxProfileSize = 1 << 20

// Profile is a parsed and validated seccomp profile, ready to Compile.
type Profile struct {
	// Name is "default" or "strict" for a built-in profile, else the
	// absolute path it was loaded from.
	Name string
	// Source names the bytes in messages: the path, or
	// "seccomp-profiles/NAME.json (built in)".
	Source string
	// SHA256 is the hex SHA-256 of the profile's JSON bytes, for the run
	// record: which filter ran is then checkable after the fact.
	SHA256 string

	defaultAct action
	arches     []specs.Arch
	// rules are the profile's rules as written, one syscall each;
	// WithVariant plans them again with its own added.
	rules []rule
	// plan is the rules Compile hands to libseccomp: the profile's rules,
	// one syscall each, with unconditional rules that have exceptions
	// replaced by their complement (see planSyscall).
	plan []rule
}

// action is a validated rule action.
type action struct {
	kind  specs.LinuxSeccompAction
	errno uint // SCMP_ACT_ERRNO only
}

func (a action) String() string {
	if a.kind == specs.ActErrno {
		return fmt.Sprintf("%s(%d)", a.kind, a.errno)
	}
	return string(a.kind)
}

// Load reads and validates a profile: "default" and "strict" are the
// built-in profiles (seccomp-profiles/), "default+loopback",
// "strict+proxy" and the like the same with WithVariant, those ending in
// NoProcSuffix the same with WithoutProcesses, an absolute path
// is a file. A problem in the profile itself is a *ProfileError naming the
// file, the line and the culprit.
func Load(nameOrPath string) (*Profile, error) {
	if from, ok := noProcOf(nameOrPath); ok {
		p, err := Load(from)
		if err != nil {
			return nil, err
		}
		return p.WithoutProcesses()
	}
	if base, suffix, ok := variantOf(nameOrPath); ok {
		p, err := Load(base)
		if err != nil {
			return nil, err
		}
		return p.WithVariant(suffix)
	}
	src, err := readSource(nameOrPath)
	if err != nil {
		return nil, err
	}
	return parse(src.name, src.source, src.data)
}

// source is a profile's bytes and what to call them.
type source struct {
	name    string // Profile.Name: the built-in name or the absolute path
	source  string // Profile.Source: how messages name the bytes
	builtin bool   // embedded in the binary rather than a file
	data    []byte
}

// readSource reads the bytes Load parses, refusing what Load refuses.
func readSource(nameOrPath string) (*source, error) {
	switch {
	case filepath.IsAbs(nameOrPath):
		data, err := readProfileFile(nameOrPath)
		if err != nil {
			return nil, err
		}
		return &source{name: nameOrPath, source: nameOrPath, data: data}, nil
	case slices.Contains(seccompprofiles.Names(), nameOrPath):
		data, err := seccompprofiles.Read(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("load seccomp profile %q: %w", nameOrPath, err)
		}
		return &source{name: nameOrPath, source: "seccomp-profiles/" + nameOrPath + ".json (built in)", builtin: true, data: data}, nil
	default:
		return nil, notAProfile(nameOrPath)
	}
}

// notAProfile is the error for a profile name that is neither a built-in
// profile nor an absolute path. A relative path would depend on the
// caller's cwd: it is refused too.
func notAProfile(nameOrPath string) error {
	return fmt.Errorf("load seccomp profile %q: neither a built-in profile (%s) nor an absolute path",
		nameOrPath, strings.Join(seccompprofiles.Names(), ", "))
}

// readProfileFile reads a regular file of at most maxProfileSize bytes.
func readProfileFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open seccomp profile %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat seccomp profile %s: %w", path, err)
	}
	// A FIFO or device would block or never end.
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read seccomp profile %s: not a regular file (%s)", path, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read seccomp profile %s: %w", path, err)
	}
	if len(data) > maxProfileSize {
		return nil, fmt.Errorf("read seccomp profile %s: larger than %d bytes", path, maxProfileSize)
	}
	return data, nil
}

// parses counts parse calls; only tests read it.
var parses atomic.Int64

// parse decodes and validates data; source names it in errors.
func parse(name, source string, data []byte) (*Profile, error) {
	// Counted for the tests that prove a cache hit parses nothing.
	parses.Add(1)
	sum := sha256.Sum256(data)
	jp, err := decodeProfile(source, data)
	if err != nil {
		return nil, err
	}
	fail := func(line int, field string, format string, args ...any) error {
		return &ProfileError{Source: source, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
	}
	p := &Profile{Name: name, Source: source, SHA256: hex.EncodeToString(sum[:])}

	if p.defaultAct, err = parseAction(jp.DefaultAction, jp.DefaultErrnoRet, "defaultErrnoRet"); err != nil {
		return nil, fail(lineOfKey(data, "defaultAction"), "defaultAction", "%w", err)
	}
	// The architectures are explicit: an empty list would mean "whatever
	// the supervisor runs on" for runc, a guess we do not make.
	if len(jp.Architectures) == 0 {
		return nil, fail(lineOfKey(data, "architectures"), "architectures", "missing or empty: list the architectures the profile was written for, e.g. [%q, %q]", specs.ArchX86_64, specs.ArchAARCH64)
	}
	for i, a := range jp.Architectures {
		field := fmt.Sprintf("architectures[%d]", i)
		if !knownArch(a) {
			return nil, fail(lineOfString(data, 1, string(a)), field, "unknown architecture %q", a)
		}
		if slices.Contains(p.arches, a) {
			return nil, fail(lineOfString(data, 1, string(a)), field, "%q listed twice", a)
		}
		p.arches = append(p.arches, a)
	}
	// Install sets no flag and nsbox runs no listener: refuse rather than
	// ignore what the profile asks for.
	if len(jp.Flags) > 0 {
		return nil, fail(lineOfKey(data, "flags"), "flags", "not supported: nsbox installs the filter without flags (never SECCOMP_FILTER_FLAG_SPEC_ALLOW)")
	}
	if jp.ListenerPath != "" || jp.ListenerMetadata != "" {
		return nil, fail(lineOfKey(data, "listenerPath"), "listenerPath", "not supported: nsbox has no seccomp notify listener")
	}

	lines := ruleLines(data)
	var rules []rule
	for i, jr := range jp.Syscalls {
		where := fmt.Sprintf("syscalls[%d]", i)
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		rs, err := parseRule(jr, where, line, data)
		if err != nil {
			return nil, &ProfileError{Source: source, Line: err.line, Field: err.field, Err: err.err}
		}
		rules = append(rules, rs...)
	}
	// Each rule costs at least one instruction: more cannot compile, and
	// the overlap checks below are quadratic per syscall.
	if len(rules) > load.MaxInsns {
		return nil, fail(lineOfKey(data, "syscalls"), "syscalls", "%d rules (one per syscall name): a filter holds at most %d instructions", len(rules), load.MaxInsns)
	}
	p.rules = rules
	if p.plan, err = plan(rules); err != nil {
		var re *ruleError
		if errors.As(err, &re) {
			return nil, &ProfileError{Source: source, Line: re.line, Field: re.field, Err: re.err}
		}
		return nil, &ProfileError{Source: source, Err: err}
	}
	return p, nil
}

// ruleError locates a problem in one rule until parse adds the source.
type ruleError struct {
	line  int
	field string
	err   error
}

func (e *ruleError) Error() string { return e.field + ": " + e.err.Error() }

// parseRule validates one element of "syscalls" and expands it into one
// rule per syscall name.
func parseRule(jr jsonRule, where string, line int, data []byte) ([]rule, *ruleError) {
	fail := func(line int, field string, format string, args ...any) *ruleError {
		return &ruleError{line: line, field: field, err: fmt.Errorf(format, args...)}
	}
	if len(jr.Names) == 0 {
		return nil, fail(line, where+".names", "missing or empty")
	}
	act, err := parseAction(jr.Action, jr.ErrnoRet, "errnoRet")
	if err != nil {
		return nil, fail(line, where+".action", "%w", err)
	}
	conds, cerr := parseArgs(jr.Args, where)
	if cerr != nil {
		cerr.line = line
		return nil, cerr
	}
	var rules []rule
	for i, name := range jr.Names {
		field := fmt.Sprintf("%s.names[%d] %q", where, i, name)
		if slices.Contains(jr.Names[:i], name) {
			return nil, fail(lineOfString(data, line, name), field, "listed twice in the same rule")
		}
		// A name libseccomp does not know would be dropped by other
		// loaders: a lost allow breaks the program, a lost deny silently
		// weakens the profile. Either is an error here.
		if err := knownSyscall(name); err != nil {
			return nil, fail(lineOfString(data, line, name), field, "%w", err)
		}
		rules = append(rules, rule{syscall: name, act: act, conds: conds, where: where, line: line})
	}
	return rules, nil
}

// parseAction validates an action and its errno (field names the errno key).
func parseAction(kind specs.LinuxSeccompAction, errnoRet *uint, field string) (action, error) {
	switch kind {
	case specs.ActAllow, specs.ActKill, specs.ActKillThread, specs.ActKillProcess, specs.ActTrap, specs.ActLog:
		if errnoRet != nil {
			return action{}, fmt.Errorf("%s is only for %s, not %s", field, specs.ActErrno, kind)
		}
		return action{kind: kind}, nil
	case specs.ActErrno:
		// runc's default: EPERM.
		errno := uint(1)
		if errnoRet != nil {
			errno = *errnoRet
		}
		// 0 would make the syscall "succeed" without running; above 4095
		// it is not an errno the C library recognises.
		if errno == 0 || errno > 4095 {
			return action{}, fmt.Errorf("%s %d: want an errno from 1 to 4095", field, errno)
		}
		return action{kind: kind, errno: errno}, nil
	case specs.ActNotify:
		return action{}, fmt.Errorf("action %s is not supported: nsbox has no notify listener", kind)
	case specs.ActTrace:
		return action{}, fmt.Errorf("action %s is not supported: nsbox runs no tracer (the syscall would just fail with ENOSYS)", kind)
	case "":
		return action{}, errors.New("missing action")
	default:
		return action{}, fmt.Errorf("unknown action %q", kind)
	}
}

// parseArgs validates a rule's argument conditions.
func parseArgs(args []specs.LinuxSeccompArg, where string) ([]cond, *ruleError) {
	var conds []cond
	for i, a := range args {
		field := fmt.Sprintf("%s.args[%d]", where, i)
		fail := func(format string, args ...any) *ruleError {
			return &ruleError{field: field, err: fmt.Errorf(format, args...)}
		}
		if a.Index > 5 {
			return nil, fail("index %d: a syscall has arguments 0 to 5", a.Index)
		}
		c := cond{index: a.Index, op: a.Op, value: a.Value, datum: a.ValueTwo}
		switch a.Op {
		case specs.OpMaskedEqual:
			if a.ValueTwo&^a.Value != 0 {
				return nil, fail("valueTwo %#x has bits outside the mask value %#x: the condition never matches", a.ValueTwo, a.Value)
			}
		case specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual, specs.OpEqualTo, specs.OpGreaterEqual, specs.OpGreaterThan:
			if a.ValueTwo != 0 {
				return nil, fail("valueTwo is only for %s", specs.OpMaskedEqual)
			}
		default:
			return nil, fail("unknown op %q", a.Op)
		}
		// libseccomp turns an always-true condition into an unconditional
		// rule, which then overrides the syscall's other rules.
		if c.always() {
			return nil, fail("%s always matches: drop the condition", c)
		}
		if c.never() {
			return nil, fail("%s never matches", c)
		}
		// runc splits same-argument conditions into OR'ed rules, libseccomp
		// would AND them (or refuse): the meaning is ambiguous.
		for _, prev := range conds {
			if prev.index == c.index {
				return nil, fail("second condition on argument %d in one rule: write one rule per condition (they are then OR'ed)", c.index)
			}
		}
		conds = append(conds, c)
	}
	return conds, nil
}
