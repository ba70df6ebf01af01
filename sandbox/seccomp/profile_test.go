package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// TestBuiltinProfiles loads and compiles every embedded profile.
func TestBuiltinProfiles(t *testing.T) {
	if got := seccompprofiles.Names(); !slices.Equal(got, []string{"default", "strict"}) {
		t.Fatalf("built-in profiles %v, want [default strict]", got)
	}
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range seccompprofiles.Names() {
		p := mustLoad(t, name)
		data, err := seccompprofiles.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if p.Name != name || p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: Name %q SHA256 %s, want %q %x", name, p.Name, p.SHA256, name, sum)
		}
		prog, err := p.Compile()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if prog.Profile != name || prog.SHA256 != p.SHA256 || archs[prog.Arch] != native || len(prog.Raw)%8 != 0 {
			t.Errorf("%s: Program{%q %s %s, %d bytes}", name, prog.Profile, prog.SHA256, prog.Arch, len(prog.Raw))
		}
		t.Logf("%s: %d rules planned, %d BPF instructions for %s", name, len(p.plan), len(prog.Raw)/8, prog.Arch)
	}
}

// TestBuiltinNamesExist checks that every syscall a built-in profile names
// exists on x86_64 or aarch64: a name only libseccomp's tables know (an
// i386-only call, say) would be dead weight that reads like protection.
func TestBuiltinNamesExist(t *testing.T) {
	for _, name := range seccompprofiles.Names() {
		for _, r := range mustLoad(t, name).plan {
			amd, _ := libseccomp.GetSyscallFromNameByArch(r.syscall, libseccomp.ArchAMD64)
			arm, _ := libseccomp.GetSyscallFromNameByArch(r.syscall, libseccomp.ArchARM64)
			if amd < 0 && arm < 0 {
				t.Errorf("%s: %s %q exists on neither x86_64 nor aarch64", name, r.where, r.syscall)
			}
		}
	}
}

// TestStrictIsTighter checks that strict allows unconditionally no syscall
// that default does not.
func TestStrictIsTighter(t *testing.T) {
	allowed := func(p *Profile) map[string]bool {
		m := map[string]bool{}
		for _, r := range p.plan {
			if len(r.conds) == 0 && r.act.kind == specs.ActAllow {
				m[r.syscall] = true
			}
		}
		return m
	}
	def := allowed(mustLoad(t, "default"))
	for name := range allowed(mustLoad(t, "strict")) {
		if !def[name] {
			t.Errorf("strict allows %s, default does not", name)
		}
	}
}

// minimal is a valid profile to break one piece at a time.
const minimal = `{
	"defaultAction": "SCMP_ACT_ERRNO",
	"defaultErrnoRet": 38,
	"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
	"syscalls": [
		{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
		RULE
	]
}
`

func withRule(rule string) string { return strings.Replace(minimal, "RULE", rule, 1) }

// TestLoadErrors checks that each broken profile is refused with a message
// naming the file, the line and the culprit.
func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		json string
		line int      // want this line in the error (0: do not check)
		want []string // substrings of the message
	}{
		{"syntax", "{\n\"defaultAction\": \"SCMP_ACT_ERRNO\",\n\"architectures\": [}\n", 3, []string{"invalid JSON"}},
		{"empty", "", 0, []string{"empty file"}},
		{"trailing data", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW"}`) + "{}", 0, []string{"unexpected data after the profile"}},
		{"type", withRule(`{"names": "close", "action": "SCMP_ACT_ALLOW"}`), 0, []string{"names", "JSON string where []string"}},
		{"unknown syscall", withRule(`{"names": ["close",
			"fooobar"], "action": "SCMP_ACT_ALLOW"}`), 8, []string{`syscalls[1].names[1] "fooobar"`, "unknown to libseccomp"}},
		{"unknown action", withRule(`{"names": ["close"], "action": "SCMP_ACT_FOO"}`), 7, []string{"syscalls[1].action", `unknown action "SCMP_ACT_FOO"`}},
		{"unknown key", withRule(`{"names": ["close"], "action": "SCMP_ACT_ERRNO", "errno": 1}`), 7, []string{"errno", "unknown key"}},
		{"errno 0", withRule(`{"names": ["close"], "action": "SCMP_ACT_ERRNO", "errnoRet": 0}`), 7, []string{"errnoRet 0"}},
		{"errno on allow", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}`), 7, []string{"errnoRet is only for SCMP_ACT_ERRNO"}},
		{"notify", withRule(`{"names": ["close"], "action": "SCMP_ACT_NOTIFY"}`), 7, []string{"SCMP_ACT_NOTIFY is not supported"}},
		{"no names", withRule(`{"names": [], "action": "SCMP_ACT_ALLOW"}`), 7, []string{"syscalls[1].names", "missing"}},
		{"name twice in a rule", withRule(`{"names": ["close", "close"], "action": "SCMP_ACT_ALLOW"}`), 7, []string{"listed twice"}},
		{"listed twice", withRule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO"}`), 7, []string{`syscalls[1] "read"`, "also listed without conditions in syscalls[0]"}},
		{"bad index", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}`), 7, []string{"syscalls[1].args[0]", "index 6"}},
		{"bad op", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_XX"}]}`), 7, []string{`unknown op "SCMP_CMP_XX"`}},
		{"never", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "valueTwo": 2, "op": "SCMP_CMP_MASKED_EQ"}]}`), 7, []string{"never matches"}},
		{"always", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_GE"}]}`), 7, []string{"always matches"}},
		{"valueTwo", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "valueTwo": 1, "op": "SCMP_CMP_EQ"}]}`), 7, []string{"valueTwo is only for SCMP_CMP_MASKED_EQ"}},
		{"same argument twice", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [
			{"index": 0, "value": 1, "op": "SCMP_CMP_NE"}, {"index": 0, "value": 2, "op": "SCMP_CMP_NE"}]}`), 7, []string{"second condition on argument 0"}},
		{"overlap", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_LT"}]},
			{"names": ["close"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 4, "valueTwo": 4, "op": "SCMP_CMP_MASKED_EQ"}]}`),
			8, []string{`syscalls[2] "close"`, "can match the same call as syscalls[1]"}},
		{"overlap on other arguments", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]},
			{"names": ["close"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_EQ"}]}`),
			8, []string{"can match the same call as syscalls[1]"}},
		{"exception form", withRule(`{"names": ["close"], "action": "SCMP_ACT_ALLOW"},
			{"names": ["close"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_GT"}]}`),
			8, []string{`syscalls[2] "close"`, "exception to the unconditional rule in syscalls[1]"}},
		{"no architectures", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}`, 0, []string{"architectures", "missing or empty"}},
		{"unknown architecture", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_PDP11"]}`, 1, []string{`unknown architecture "SCMP_ARCH_PDP11"`}},
		{"flags", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
			"flags": ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"]}`, 2, []string{"flags", "not supported"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "profile.json")
			if err := os.WriteFile(path, []byte(c.json), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			var pe *ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("Load: %v, want a *ProfileError", err)
			}
			msg := err.Error()
			for _, w := range append(c.want, path) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if c.line != 0 && pe.Line != c.line {
				t.Errorf("error %q: line %d, want %d", msg, pe.Line, c.line)
			}
		})
	}
}

// TestLoadArguments checks what Load accepts as a name or path.
func TestLoadArguments(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"default.json", "neither a built-in profile"},
		{"../seccomp-profiles/default.json", "neither a built-in profile"},
		{"/nonexistent/profile.json", "open seccomp profile /nonexistent/profile.json"},
		{"/dev/null", "not a regular file"},
	} {
		if _, err := Load(c.arg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q): %v, want an error containing %q", c.arg, err, c.want)
		}
	}
}

// TestCompileWrongArch checks that a profile without this machine's
// architecture compiles to nothing rather than to a filter for another.
func TestCompileWrongArch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "riscv.json")
	if err := os.WriteFile(path, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_RISCV64"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := mustLoad(t, path).Compile()
	if err == nil || !strings.Contains(err.Error(), "not this machine's") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Compile: %v, want a wrong-architecture error naming %s", err, path)
	}
}

// TestExceptions checks the one extension to runc's semantics on a file
// profile: an unconditional rule with exceptions, which libseccomp alone
// would reduce to the unconditional rule.
func TestExceptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ioctl.json")
	if err := os.WriteFile(path, []byte(withRule(`{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW"},
		{"names": ["ioctl"], "action": "SCMP_ACT_KILL_PROCESS", "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]},
		{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13, "args": [{"index": 1, "value": 4294967040, "valueTwo": 35072, "op": "SCMP_CMP_MASKED_EQ"}]}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	prog, err := mustLoad(t, path).compileFor(libseccomp.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	f := newFilterVM(t, prog.Raw, libseccomp.ArchAMD64)
	ioctl := f.nr(t, "ioctl")
	for _, c := range []struct {
		cmd  uint64
		want uint32
	}{
		{0x5412, retKill},
		{0x1_00005412, retAllow}, // EQ compares all 64 bits
		{0x8900, retErrno(13)},
		{0x89ff, retErrno(13)},
		{0x7_000089ab, retErrno(13)}, // the mask ignores the high word
		{0x8a00, retAllow},
		{0x5413, retAllow},
		{0, retAllow},
	} {
		if got := f.run(t, ioctl, f.audit, [6]uint64{3, c.cmd}); got != c.want {
			t.Errorf("ioctl(3, %#x): %s, want %s", c.cmd, retString(got), retString(c.want))
		}
	}
}

// TestExceptionsOnSeveralArguments: an exception may hold on a
// combination of arguments (ANDed); the unconditional rule then covers
// every other combination, on either argument.
func TestExceptionsOnSeveralArguments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "socket.json")
	if err := os.WriteFile(path, []byte(withRule(`{"names": ["socket"], "action": "SCMP_ACT_ALLOW"},
		{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13, "args": [
			{"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}, {"index": 1, "value": 15, "valueTwo": 2, "op": "SCMP_CMP_MASKED_EQ"}]}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	prog, err := mustLoad(t, path).compileFor(libseccomp.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	f := newFilterVM(t, prog.Raw, libseccomp.ArchAMD64)
	socket := f.nr(t, "socket")
	for _, c := range []struct {
		family, typ uint64
		want        uint32
	}{
		{unix.AF_INET, unix.SOCK_DGRAM, retErrno(13)},
		{unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, retErrno(13)},
		{unix.AF_INET, unix.SOCK_STREAM, retAllow},
		{unix.AF_INET6, unix.SOCK_DGRAM, retAllow},
		{unix.AF_INET | highBit, unix.SOCK_DGRAM, retAllow}, // EQ compares all 64 bits
		{0, 0, retAllow},
	} {
		if got := f.run(t, socket, f.audit, [6]uint64{c.family, c.typ}); got != c.want {
			t.Errorf("socket(%#x, %#x): %s, want %s", c.family, c.typ, retString(got), retString(c.want))
		}
	}
}

// TestExceptionsTooMany: exceptions whose blocks multiply (see
// TestComplementLimit) are refused with the rule named, promptly.
func TestExceptionsTooMany(t *testing.T) {
	rules := []string{`{"names": ["close"], "action": "SCMP_ACT_ALLOW"}`}
	for i := range 20 {
		rules = append(rules, fmt.Sprintf(`{"names": ["close"], "action": "SCMP_ACT_ERRNO", "args": [
			{"index": 0, "value": %d, "valueTwo": %d, "op": "SCMP_CMP_MASKED_EQ"}, {"index": 1, "value": %d, "op": "SCMP_CMP_EQ"}]}`, 1<<i, 1<<i, i))
	}
	path := filepath.Join(t.TempDir(), "close.json")
	if err := os.WriteFile(path, []byte(withRule(strings.Join(rules, ",\n"))), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), `syscalls[1] "close"`) || !strings.Contains(err.Error(), "more than the 4096 instructions") {
		t.Fatalf("Load: %v, want an error naming syscalls[1] and the filter's size", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Load took %s to give up", d)
	}
}

func retErrno(n uint32) uint32 { return unix.SECCOMP_RET_ERRNO | n }
