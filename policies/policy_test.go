package policies

import (
	"github.com/nsbox/nsbox/sandbox/pyrunner"

	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBuiltins(t *testing.T) {
	// The limits that bound a run: memory with swap off (strict 256 MiB,
	// default 512 MiB), pids (strict 32, default 64), one CPU.
	strictLimits := Limits{Timeout: Duration{10 * time.Second}, OutputLimit: 64 * kib, OutputMode: OutputKill, Memory: 256 * mib, Pids: 32, CPUs: 1,
		CPUTime: Duration{10 * time.Second}, OpenFiles: 256, FileSize: 16 * mib, Stack: 8 * mib,
		WorkspaceSize: 64 * mib, WorkspaceInodes: 4096, ProgramSize: mib}
	defaultLimits := Limits{Timeout: Duration{30 * time.Second}, OutputLimit: mib, OutputMode: OutputKill, Memory: 512 * mib, Pids: 64, CPUs: 1,
		CPUTime: Duration{30 * time.Second}, OpenFiles: 1024, FileSize: 64 * mib, Stack: 8 * mib,
		WorkspaceSize: 256 * mib, WorkspaceInodes: 16384, ProgramSize: mib}
	datasciLimits := Limits{Timeout: Duration{60 * time.Second}, OutputLimit: mib, OutputMode: OutputTruncate, Memory: gib, Pids: 64, CPUs: 1,
		CPUTime: Duration{60 * time.Second}, OpenFiles: 1024, FileSize: 256 * mib, Stack: 8 * mib,
		WorkspaceSize: 512 * mib, WorkspaceInodes: 65536, ProgramSize: mib}
	all := []string{"namespaces", "cgroups", "seccomp", "memfd_noexec"}
	tests := []struct {
		name                  string
		root                  string
		limits                Limits
		tmp, shm              Size
		sandbox               Sandbox
		env                   map[string]string
		allow                 Allowlist
		storeCode             bool
		descriptionMentioning string
	}{
		{"datasci", "datasci", datasciLimits, 256 * mib, 64 * mib, Sandbox{all, "default", true, false}, map[string]string{"MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib"},
			Allowlist{pyrunner.DatasciAllow, pyrunner.DefaultDenyBuiltins, pyrunner.DefaultDenyEvents, false, []string{"matplotlib.pyplot", "numpy", "pandas"}}, false, "pandas"},
		{"datasci-min", "datasci-min", datasciLimits, 256 * mib, 64 * mib, Sandbox{all, "default", true, false}, map[string]string{"MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib"},
			Allowlist{pyrunner.DatasciMinAllow, pyrunner.DefaultDenyBuiltins, pyrunner.DefaultDenyEvents, false, []string{"matplotlib.pyplot", "numpy", "pandas"}}, false, "pandas"},
		{"default", "base", defaultLimits, 64 * mib, 16 * mib, Sandbox{all, "default", true, false}, map[string]string{},
			Allowlist{pyrunner.DefaultAllow, pyrunner.DefaultDenyBuiltins, pyrunner.DefaultDenyEvents, false, []string{}}, false, "limits"},
		{"permissive", "base", defaultLimits, 64 * mib, 16 * mib, Sandbox{[]string{"namespaces"}, "default", true, false}, map[string]string{},
			Allowlist{[]string{"*"}, []string{}, []string{}, false, []string{}}, false, "isolation"},
		{"strict", "base", strictLimits, 16 * mib, 8 * mib, Sandbox{all, "strict", true, false}, map[string]string{},
			Allowlist{pyrunner.StrictAllow, pyrunner.StrictDenyBuiltins, pyrunner.StrictDenyEvents, true, []string{}}, true, "untrusted agent code"},
	}
	if got, want := BuiltinNames(), []string{"datasci", "datasci-min", "default", "permissive", "strict", "web"}; !slices.Equal(got, want) {
		t.Fatalf("BuiltinNames() = %v, want %v", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Builtin(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			mode := ModeGuarded // default states it; the others extend default
			if tt.name == "strict" {
				mode = ModeRestricted
			}
			want := &Policy{
				Name:        tt.name,
				Description: p.Description,
				Python:      Python{Root: tt.root, Verify: VerifyQuick, Mode: mode},
				Limits:      tt.limits,
				Filesystem:  Filesystem{TmpSize: tt.tmp, ShmSize: tt.shm},
				Sandbox:     tt.sandbox,
				Network:     Network{Mode: NetworkNone, Allow: []string{}},
				Allowlist:   tt.allow, // the shipped lists are sandbox/pyrunner's
				Audit:       Audit{StoreCode: tt.storeCode},
				SHA256:      p.SHA256,
				Env:         tt.env,
			}
			if !reflect.DeepEqual(p, want) {
				t.Errorf("Builtin(%q) =\n%+v\nwant\n%+v", tt.name, p, want)
			}
			if !strings.Contains(p.Description, tt.descriptionMentioning) {
				t.Errorf("description %q does not mention %q", p.Description, tt.descriptionMentioning)
			}
			if err := p.validate("x", func(string) int { return 0 }); err != nil {
				t.Errorf("re-validate: %v", err)
			}
			// Each call returns a fresh copy that callers may narrow.
			p.Limits.Timeout.Duration = time.Second
			if q, _ := Builtin(tt.name); q.Limits.Timeout != tt.limits.Timeout {
				t.Error("Builtin returned shared state")
			}
		})
	}
}

// TestBuiltinFileHeaders checks the shipped files' comments: the first line
// names the policy and what it is for, a paragraph under it says why. What
// each key means, its type and range are docs/policies.md's: a file that
// repeats a range has started re-documenting keys.
func TestBuiltinFileHeaders(t *testing.T) {
	for _, name := range BuiltinNames() {
		data, err := builtinFS.ReadFile(name + ".toml")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		if !strings.HasPrefix(lines[0], `# nsbox policy "`+name+`": `) {
			t.Errorf("%s.toml: header %q does not name the policy", name, lines[0])
		}
		if lines[1] != "#" || !strings.HasPrefix(lines[2], "# ") {
			t.Errorf("%s.toml: no paragraph under the header", name)
		}
		for _, k := range Keys() {
			if r := k.Range(); r != "" && strings.Contains(string(data), r) {
				t.Errorf("%s.toml repeats the range of %s (%s): key docs live in docs/policies.md", name, k.Name, r)
			}
		}
	}
}

func TestBuiltinUnknown(t *testing.T) {
	_, err := Builtin("lax")
	if err == nil || !strings.Contains(err.Error(), "datasci, datasci-min, default, permissive, strict, web") {
		t.Fatalf("Builtin(lax) error = %v, want one listing the built-ins", err)
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	custom := strings.Replace(base, `timeout = "10s"`, `timeout = "3s"`, 1)
	must(t, os.MkdirAll("some", 0o755))
	must(t, os.WriteFile("some/file.toml", []byte(custom), 0o644))
	must(t, os.WriteFile("mine.toml", []byte(custom), 0o644))
	must(t, os.Mkdir("default", 0o755)) // a directory is not a policy file

	tests := []struct {
		arg      string
		wantName string
		timeout  time.Duration
		errHas   string
	}{
		{arg: "strict", wantName: "strict", timeout: 10 * time.Second},
		{arg: "strict.toml", wantName: "strict", timeout: 10 * time.Second},
		{arg: "default", wantName: "default", timeout: 30 * time.Second},
		{arg: "./some/file.toml", wantName: "./some/file.toml", timeout: 3 * time.Second},
		{arg: "some/file.toml", wantName: "some/file.toml", timeout: 3 * time.Second},
		{arg: filepath.Join(dir, "mine.toml"), wantName: filepath.Join(dir, "mine.toml"), timeout: 3 * time.Second},
		{arg: "mine.toml", wantName: "mine.toml", timeout: 3 * time.Second},
		{arg: "mine", errHas: `unknown policy "mine"`},
		{arg: "lax", errHas: "built-ins: datasci, datasci-min, default, permissive, strict, web"},
		{arg: "", errHas: "unknown policy"},
		{arg: "./missing.toml", errHas: "read policy ./missing.toml: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			p, err := Resolve(tt.arg)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Resolve(%q) error = %v, want it to contain %q", tt.arg, err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tt.wantName || p.Limits.Timeout.Duration != tt.timeout {
				t.Errorf("Resolve(%q) = name %q timeout %v, want %q %v", tt.arg, p.Name, p.Limits.Timeout, tt.wantName, tt.timeout)
			}
		})
	}

	// A file named like a built-in wins over the built-in.
	must(t, os.WriteFile("strict.toml", []byte(custom), 0o644))
	if p, err := Resolve("strict.toml"); err != nil || p.Limits.Timeout.Duration != 3*time.Second {
		t.Errorf("Resolve(strict.toml) with the file present = %+v, %v; want the file", p, err)
	}
}

func TestLoadFileErrorsNamePath(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	must(t, os.WriteFile(bad, []byte("[limits]\ntimout = 1\n"), 0o644))
	_, err := LoadFile(bad)
	var pe *Error
	if !errors.As(err, &pe) || pe.File != bad || pe.Line != 2 {
		t.Errorf("LoadFile error = %v, want *Error at %s:2", err, bad)
	}
	_, err = LoadFile(dir)
	if err == nil || err.Error() != "read policy "+dir+": is a directory" {
		t.Errorf("LoadFile(dir) error = %v, want read policy %s: is a directory", err, dir)
	}
	if _, err = LoadFile(filepath.Join(dir, "none.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadFile(missing) error = %v, want one matching fs.ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.toml")
	must(t, os.WriteFile(big, make([]byte, MaxFileSize+1), 0o644))
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than 1MiB") {
		t.Errorf("LoadFile(big) error = %v, want a size error", err)
	}
}

func TestNarrow(t *testing.T) {
	tests := []struct {
		name        string
		o           Overrides
		wantTimeout time.Duration
		wantOutput  Size
		errHas      []string
	}{
		{name: "zero changes nothing", wantTimeout: 10 * time.Second, wantOutput: 64 * kib},
		{name: "lower both", o: Overrides{Timeout: 2 * time.Second, OutputLimit: 2000}, wantTimeout: 2 * time.Second, wantOutput: 2000},
		{name: "lowest allowed", o: Overrides{Timeout: 100 * time.Millisecond, OutputLimit: 1024}, wantTimeout: 100 * time.Millisecond, wantOutput: kib},
		{name: "below the policy range", o: Overrides{Timeout: 50 * time.Millisecond, OutputLimit: 1000},
			errHas: []string{"--timeout 50ms: 50ms is below the minimum 100ms", "--output-limit 1000B: 1000B is below the minimum 1KiB"}},
		{name: "equal is allowed", o: Overrides{Timeout: 10 * time.Second, OutputLimit: 65536}, wantTimeout: 10 * time.Second, wantOutput: 64 * kib},
		{name: "lower timeout only", o: Overrides{Timeout: time.Second}, wantTimeout: time.Second, wantOutput: 64 * kib},
		{name: "widen timeout", o: Overrides{Timeout: 60 * time.Second},
			errHas: []string{"--timeout 1m exceeds the policy's limit of 10s (policy strict); flags can only lower limits"}},
		{name: "widen output", o: Overrides{OutputLimit: 2 << 20},
			errHas: []string{"--output-limit 2MiB exceeds the policy's limit of 64KiB (policy strict)"}},
		{name: "negative", o: Overrides{Timeout: -time.Second, OutputLimit: -1},
			errHas: []string{"--timeout -1s must be positive", "--output-limit -1B must be positive"}},
		{name: "one bad keeps both unchanged", o: Overrides{Timeout: time.Second, OutputLimit: 1 << 30},
			errHas: []string{"--output-limit 1GiB exceeds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Builtin("strict")
			if err != nil {
				t.Fatal(err)
			}
			before := *p
			err = p.Narrow(tt.o)
			if len(tt.errHas) > 0 {
				for _, s := range tt.errHas {
					if err == nil || !strings.Contains(err.Error(), s) {
						t.Errorf("Narrow(%+v) error = %v, want it to contain %q", tt.o, err, s)
					}
				}
				if p.Limits != before.Limits {
					t.Errorf("failed Narrow changed limits to %+v", p.Limits)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Limits.Timeout.Duration != tt.wantTimeout || p.Limits.OutputLimit != tt.wantOutput {
				t.Errorf("after Narrow(%+v): %+v, want %v %v", tt.o, p.Limits, tt.wantTimeout, tt.wantOutput)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{"strict.toml", 12, "limits.timeout", "45h exceeds the maximum 24h (allowed: 100ms..24h)"},
			"strict.toml:12: limits.timeout: 45h exceeds the maximum 24h (allowed: 100ms..24h)"},
		{Error{"p.toml", 0, "limits.timeout", "missing"}, "p.toml: limits.timeout: missing"},
		{Error{"p.toml", 3, "", "invalid TOML"}, "p.toml:3: invalid TOML"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// python.mode "restricted" needs strict_attributes; the error names the
// key and its line.
func TestModeNeedsStrictAttributes(t *testing.T) {
	src := "extends = \"default\"\n[python]\nmode = \"restricted\"\n"
	_, err := Parse("p.toml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "python.mode") || !strings.Contains(err.Error(), "strict_attributes") || !strings.Contains(err.Error(), ":3") {
		t.Fatalf("restricted without strict_attributes: %v", err)
	}
	if _, err := Parse("p.toml", []byte(src+"[allowlist]\nstrict_attributes = true\n")); err != nil {
		t.Fatalf("restricted with strict_attributes: %v", err)
	}
	if _, err := Parse("p.toml", []byte("extends = \"default\"\n[python]\nmode = \"lax\"\n")); err == nil || !strings.Contains(err.Error(), `"lax" is not a mode`) {
		t.Fatalf("unknown mode: %v", err)
	}
}
