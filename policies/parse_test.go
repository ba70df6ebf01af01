package policies

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// base is a valid policy; the tests below edit one line of it. Line numbers:
// 3 [python], 4 root, 5 verify, 7 [limits], 8 timeout,
// 9 output_limit, 10 memory, 11 pids, 12 cpus, 13 cpu_time, 14 open_files,
// 15 file_size, 16 stack, 17 workspace_size, 18 workspace_inodes, 19 program_size,
// 20 [filesystem], 21 tmp_size, 22 shm_size,
// 24 [sandbox], 25 require, 26 seccomp, 27 landlock, 29 [allowlist],
// 30 imports, 31 deny_builtins, 32 deny_events, 33 strict_attributes,
// 35 [audit], 36 store_code.
const base = `description = "test"

[python]
root = "base"
verify = "quick"

[limits]
timeout = "10s"
output_limit = "64KiB"
memory = "256MiB"
pids = 32
cpus = 1.0
cpu_time = "10s"
open_files = 256
file_size = "16MiB"
stack = "8MiB"
workspace_size = "64MiB"
workspace_inodes = 4096
program_size = "1MiB"
[filesystem]
tmp_size = "16MiB"
shm_size = "8MiB"

[sandbox]
require = ["namespaces", "cgroups", "seccomp"]
seccomp = "strict"
landlock = true

[allowlist]
imports = ["math", "json"]
deny_builtins = ["eval", "open"]
deny_events = ["os.system"]
strict_attributes = true

[audit]
store_code = false
`

func edit(old, new string) string {
	if !strings.Contains(base, old) {
		panic("base has no " + old)
	}
	return strings.Replace(base, old, new, 1)
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(*Policy) bool
	}{
		{"base", base, func(p *Policy) bool { return p.Name == "t.toml" && p.Limits.Timeout.Duration == 10*time.Second }},
		{"no description", edit(`description = "test"`, ""), func(p *Policy) bool { return p.Description == "" }},
		{"integer size", edit(`"64KiB"`, "1024"), func(p *Policy) bool { return p.Limits.OutputLimit == kib }},
		{"fractional duration", edit(`"10s"`, `"1.5s"`), func(p *Policy) bool { return p.Limits.Timeout.Duration == 1500*time.Millisecond }},
		{"bounds inclusive", edit(`"10s"`, `"24h"`), func(p *Policy) bool { return p.Limits.Timeout.Duration == 24*time.Hour }},
		{"env", base + "[env]\nTZ = \"UTC\"\n_x1 = \"\"\n", func(p *Policy) bool { return p.Env["TZ"] == "UTC" && len(p.Env) == 2 }},
		{"dotted keys", "python.root = \"/p\"\npython.verify = \"full\"\nlimits = { timeout = \"1s\", output_limit = 2048, " +
			"memory = \"16MiB\", pids = 4, cpus = 1, cpu_time = \"1s\", open_files = 16, file_size = \"1MiB\", stack = \"1MiB\", " +
			"workspace_size = \"1MiB\", workspace_inodes = 16, program_size = \"1KiB\" }\n" +
			"sandbox = { require = [], seccomp = \"none\", landlock = false }\n" +
			"allowlist = { imports = [\"*\"], deny_builtins = [], deny_events = [], strict_attributes = false }\n" +
			"audit = { store_code = true }\n" +
			"[filesystem]\ntmp_size = \"1MiB\"\nshm_size = \"1MiB\"\n",
			func(p *Policy) bool {
				return p.Python.Root == "/p" && p.Python.Verify == VerifyFull && p.Limits.OutputLimit == 2*kib
			}},
		{"integer cpus", edit("cpus = 1.0", "cpus = 2"), func(p *Policy) bool { return p.Limits.CPUs == 2 && p.Limits.Threads() == 2 }},
		{"fractional cpus round up threads", edit("cpus = 1.0", "cpus = 0.5"), func(p *Policy) bool { return p.Limits.Threads() == 1 }},
		{"seccomp path", edit(`seccomp = "strict"`, `seccomp = "/etc/nsbox/my.json"`), func(p *Policy) bool { return p.Sandbox.Seccomp == "/etc/nsbox/my.json" }},
		{"all imports", edit(`imports = ["math", "json"]`, `imports = ["*"]`), func(p *Policy) bool { return p.Allowlist.AllowsEverything() }},
		{"allowlist", base, func(p *Policy) bool {
			return !p.Allowlist.AllowsEverything() && len(p.Allowlist.Imports) == 2 && p.Allowlist.StrictAttributes && len(p.SHA256) == 64
		}},
		{"nothing required", edit(`["namespaces", "cgroups", "seccomp"]`, "[]"), func(p *Policy) bool { return len(p.Sandbox.Require) == 0 && !p.Requires("cgroups") }},
		{"multi-line array", edit(`["namespaces", "cgroups", "seccomp"]`, "[\n  \"namespaces\", # always\n  \"cgroups\",\n]"),
			func(p *Policy) bool { return len(p.Sandbox.Require) == 2 }},
		{"root path", edit(`root = "base"`, `root = "/var/lib/nsbox/roots/mine"`), func(p *Policy) bool { return p.Python.Root == "/var/lib/nsbox/roots/mine" }},
		{"datasci root", edit(`root = "base"`, `root = "datasci"`), func(p *Policy) bool { return p.Python.Root == "datasci" }},
		{"preload", edit("strict_attributes = true", "strict_attributes = true\npreload = [\"json.decoder\", \"math\"]"),
			func(p *Policy) bool { return slices.Equal(p.Allowlist.Preload, []string{"json.decoder", "math"}) }},
		{"preload with every import", edit(`imports = ["math", "json"]`, "imports = [\"*\"]\npreload = [\"os\"]"),
			func(p *Policy) bool { return slices.Equal(p.Allowlist.Preload, []string{"os"}) }},
		{"no preload", base, func(p *Policy) bool { return p.Allowlist.Preload != nil && len(p.Allowlist.Preload) == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("t.toml", []byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(p) {
				t.Errorf("unexpected policy %+v", p)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		line int
		key  string
		has  []string // substrings of the message
	}{
		// Unknown keys.
		{"typo at top level", "timout = \"5s\"\n" + base, 1, "timout",
			[]string{"unknown key", "allowed at the top level: extends, description, python, limits, filesystem, sandbox, network, allowlist, audit, env", "(timeout belongs in [limits])"}},
		{"typo in limits", edit(`timeout = "10s"`, `timout = "10s"`), 8, "limits.timout",
			[]string{"unknown key", `did you mean "timeout"?`, "allowed in [limits]: timeout, output_limit, output_mode, program_size, memory, pids"}},
		{"other case in limits", edit("output_limit = \"64KiB\"", "output_limit = \"64KiB\"\nTimeout = \"1h\""), 10, "limits.Timeout",
			[]string{`did you mean "timeout"?`}},
		{"key in wrong table", edit("[filesystem]", "[filesystem]\ntimeout = \"1s\""), 21, "filesystem.timeout",
			[]string{"(timeout belongs in [limits])", "allowed in [filesystem]: tmp_size, shm_size"}},
		// Network allowlist mode.
		{"allow without port", base + "\n[network]\nallow = [\"example.com\"]\n", 39, "network.allow",
			[]string{"element 1", `"example.com"`, "host:port"}},
		{"allowlist without limits", base + "\n[network]\nmode = \"allowlist\"\n", 39, "network.mode",
			[]string{"needs network.max_connections"}},
		{"allowlist without max_bytes", base + "\n[network]\nmode = \"allowlist\"\nmax_connections = 8\n", 39, "network.mode",
			[]string{"needs network.max_bytes"}},
		{"allowlist with loopback sockets", edit(`seccomp = "strict"`, "seccomp = \"strict\"\nloopback_sockets = true") + "\n[network]\nmode = \"allowlist\"\nmax_connections = 8\nmax_bytes = \"1MiB\"\n", 40, "network.mode",
			[]string{"cannot be combined with sandbox.loopback_sockets"}},
		{"unknown network mode", base + "\n[network]\nmode = \"open\"\n", 39, "network.mode",
			[]string{`"none" (loopback only) or "allowlist"`}},
		{"unknown table", base + "\n[netwrok]\nallow = true\n", 38, "netwrok", []string{"unknown table"}},
		{"unknown subtable", base + "[limits.swap]\nmax = 1\n", 37, "limits.swap", []string{"unknown table", "allowed in [limits]"}},
		{"unknown dotted key", edit(`timeout = "10s"`, "timeout = \"10s\"\nswap.max = \"1GiB\""), 9, "limits.swap", []string{"unknown table"}},
		{"unknown inline key", edit(`description = "test"`, `x = { y = 1 }`), 1, "x", []string{"unknown table"}},
		{"after multi-line string", edit(`description = "test"`, "description = \"\"\"\ntimout = 1\n[limits]\n\"\"\"\ntimout = 1"), 5, "timout", []string{"unknown key"}},

		// Missing keys.
		{"missing timeout", edit(`timeout = "10s"`, ""), 7, "limits.timeout",
			[]string{"missing required key", `timeout = "30s"`, "allowed: 100ms..24h"}},
		{"missing table", edit("[filesystem]\ntmp_size = \"16MiB\"\nshm_size = \"8MiB\"\n", ""), 0, "filesystem.tmp_size", []string{"missing required key"}},
		{"empty document", "", 0, "python.root", []string{"missing required key"}},

		// Types and syntax.
		{"syntax", edit(`timeout = "10s"`, `timeout = "10s`), 8, "", []string{"invalid TOML at column"}},
		{"duplicate key", edit(`timeout = "10s"`, "timeout = \"10s\"\ntimeout = \"1s\""), 9, "", []string{"invalid TOML", "already been defined"}},
		{"table as value", "limits = 5\n", 1, "limits", []string{"must be a table, not an integer", "with timeout, output_limit"}},
		{"env as value", "env = \"X=1\"\n" + base, 1, "env", []string{"must be a table, not a string", "[env] table"}},
		{"duration not string", edit(`"10s"`, "10"), 8, "limits.timeout", []string{"must be a duration string", "not an integer", "allowed: 100ms..24h"}},
		{"description table", edit(`description = "test"`, "description.x = 1"), 1, "description", []string{"must be a string, not a table"}},
		{"require element", edit(`["namespaces", "cgroups", "seccomp"]`, `["namespaces", 5]`), 25, "sandbox.require", []string{"element 2 must be a string"}},
		{"size float", edit(`"64KiB"`, "1.5"), 9, "limits.output_limit", []string{"not a float"}},

		// Values.
		{"bad duration", edit(`"10s"`, `"10 seconds"`), 8, "limits.timeout", []string{`"10 seconds" is not a duration`, "100ms..24h"}},
		{"timeout too long", edit(`"10s"`, `"45h"`), 8, "limits.timeout", []string{"45h exceeds the maximum 24h (allowed: 100ms..24h)"}},
		{"timeout too short", edit(`"10s"`, `"50ms"`), 8, "limits.timeout", []string{"50ms is below the minimum 100ms"}},
		{"bad size", edit(`"64KiB"`, `"64KB"`), 9, "limits.output_limit", []string{`"64KB" is not a size`, "KiB", "1KiB..1GiB"}},
		{"size too big", edit("tmp_size = \"16MiB\"", "tmp_size = \"17GiB\""), 21, "filesystem.tmp_size", []string{"17GiB exceeds the maximum 16GiB (allowed: 1MiB..16GiB)"}},
		{"size too small", edit("shm_size = \"8MiB\"", "shm_size = 4096"), 22, "filesystem.shm_size", []string{"4KiB is below the minimum 1MiB"}},
		{"output too small", edit(`"64KiB"`, `"512B"`), 9, "limits.output_limit", []string{"512B is below the minimum 1KiB"}},
		{"negative size", edit(`"64KiB"`, "-1"), 9, "limits.output_limit", []string{"below the minimum"}},
		{"relative root", edit(`root = "base"`, `root = "roots/base"`), 4, "python.root",
			[]string{`"roots/base" is not a built-in root or an absolute path`, "base, datasci, datasci-min, web"}},
		{"unknown root name", edit(`root = "base"`, `root = "full"`), 4, "python.root", []string{`"full" is not a built-in root`}},
		{"unclean root", edit(`root = "base"`, `root = "/srv/../roots/x"`), 4, "python.root", []string{`write "/roots/x"`}},
		{"NUL in root", edit(`root = "base"`, `root = "/r\u0000"`), 4, "python.root", []string{"NUL"}},
		{"host root", edit(`root = "base"`, `root = "/"`), 4, "python.root", []string{"host's own root"}},
		{"root not string", edit(`root = "base"`, `root = ["base"]`), 4, "python.root", []string{"must be a string, not an array"}},
		{"bad verify", edit(`verify = "quick"`, `verify = "fast"`), 5, "python.verify", []string{`"fast" is not a verification level`, `"quick"`, `"full"`}},
		{"reserved env", base + "[env]\nTZ = \"UTC\"\nLD_PRELOAD = \"/x.so\"\n", 39, "env.LD_PRELOAD", []string{"reserved", "change which code"}},
		{"reserved env PATH", base + "[env]\nPATH = \"/bin\"\n", 38, "env.PATH", []string{"nsbox sets it itself"}},
		{"bad env name", base + "[env]\n\"1X\" = \"a\"\n", 38, `env.1X`, []string{"not a valid variable name"}},
		{"quoted env name", base + "[env]\n\"A B\" = \"a\"\n", 38, `env."A B"`, []string{"not a valid variable name"}},
		{"env NUL", base + "[env]\nX = \"a\\u0000b\"\n", 38, "env.X", []string{"NUL"}},
		// A preloaded module the program may not import would be handed
		// to it loaded: refused where it is written.
		{"preload not allowed", edit("strict_attributes = true", "strict_attributes = true\npreload = [\"math\", \"os.path\"]"), 34, "allowlist.preload",
			[]string{`element 2: "os" is not allowed by allowlist.imports`}},
		{"preload bad name", edit("strict_attributes = true", "strict_attributes = true\npreload = [\"json..x\"]"), 34, "allowlist.preload",
			[]string{`"json..x" is not a module name`}},
		{"env not string", base + "[env]\nX = 1\n", 38, "env.X", []string{"must be a string, not an integer"}},
		{"memory too small", edit(`"256MiB"`, `"1MiB"`), 10, "limits.memory", []string{"1MiB is below the minimum 16MiB (allowed: 16MiB..64GiB)"}},
		{"pids not integer", edit("pids = 32", `pids = "32"`), 11, "limits.pids", []string{"must be an integer, not a string", "4..4096"}},
		{"pids too many", edit("pids = 32", "pids = 100000"), 11, "limits.pids", []string{"100000 exceeds the maximum 4096"}},
		{"cpus zero", edit("cpus = 1.0", "cpus = 0.0"), 12, "limits.cpus", []string{"0 is below the minimum 0.1"}},
		{"cpus nan", edit("cpus = 1.0", "cpus = nan"), 12, "limits.cpus", []string{"not a finite number"}},
		{"cpus string", edit("cpus = 1.0", `cpus = "1"`), 12, "limits.cpus", []string{"must be a number"}},
		{"cpu_time fraction", edit(`cpu_time = "10s"`, `cpu_time = "1500ms"`), 13, "limits.cpu_time", []string{"not a whole number of seconds"}},
		{"cpu_time too short", edit(`cpu_time = "10s"`, `cpu_time = "500ms"`), 13, "limits.cpu_time", []string{"below the minimum 1s"}},
		{"open_files too few", edit("open_files = 256", "open_files = 3"), 14, "limits.open_files", []string{"3 is below the minimum 16"}},
		{"stack too big", edit(`stack = "8MiB"`, `stack = "2GiB"`), 16, "limits.stack", []string{"exceeds the maximum 1GiB"}},
		{"workspace not below memory", edit(`workspace_size = "64MiB"`, `workspace_size = "256MiB"`), 17, "limits.workspace_size",
			[]string{"256MiB is not below limits.memory (256MiB)"}},
		{"workspace inodes too few", edit("workspace_inodes = 4096", "workspace_inodes = 8"), 18, "limits.workspace_inodes",
			[]string{"8 is below the minimum 16"}},
		{"unknown requirement", edit(`"cgroups", "seccomp"]`, `"cgroups", "apparmor"]`), 25, "sandbox.require", []string{`element 3: unknown requirement "apparmor"`, "namespaces, cgroups, seccomp, landlock"}},
		{"duplicate requirement", edit(`"cgroups", "seccomp"]`, `"cgroups", "cgroups"]`), 25, "sandbox.require", []string{"listed twice"}},
		{"unknown seccomp profile", edit(`seccomp = "strict"`, `seccomp = "docker"`), 26, "sandbox.seccomp", []string{`"docker" is not a built-in profile`, "default, strict"}},
		{"relative seccomp path", edit(`seccomp = "strict"`, `seccomp = "/a/../b.json"`), 26, "sandbox.seccomp", []string{`write "/b.json"`}},
		{"seccomp none but required", edit(`seccomp = "strict"`, `seccomp = "none"`), 26, "sandbox.seccomp", []string{"contradicts sandbox.require"}},
		{"landlock off but required", strings.Replace(edit(`"cgroups", "seccomp"]`, `"cgroups", "landlock"]`), "landlock = true", "landlock = false", 1),
			27, "sandbox.landlock", []string{"contradicts sandbox.require"}},
		{"landlock not bool", edit("landlock = true", `landlock = "yes"`), 27, "sandbox.landlock", []string{"must be a boolean, not a string"}},
		{"memfd_noexec with own profile", strings.Replace(edit(`seccomp = "strict"`, `seccomp = "/etc/p.json"`), `"cgroups", "seccomp"]`, `"cgroups", "memfd_noexec"]`, 1),
			26, "sandbox.seccomp", []string{`contradicts sandbox.require, which lists "memfd_noexec"`}},
		{"memfd_noexec with none", strings.Replace(edit(`seccomp = "strict"`, `seccomp = "none"`), `"cgroups", "seccomp"]`, `"cgroups", "memfd_noexec"]`, 1),
			26, "sandbox.seccomp", []string{`"memfd_noexec"`}},
		{"loopback with own profile", edit(`seccomp = "strict"`, "seccomp = \"/etc/p.json\"\nloopback_sockets = true"),
			27, "sandbox.loopback_sockets", []string{"needs a built-in seccomp profile"}},
		{"reserved thread env", base + "[env]\nOMP_NUM_THREADS = \"8\"\n", 38, "env.OMP_NUM_THREADS", []string{"from limits.cpus"}},
		{"star with others", edit(`imports = ["math", "json"]`, `imports = ["*", "math"]`), 30, "allowlist.imports", []string{`"*" allows every module and must be the only entry`}},
		{"dotted module", edit(`imports = ["math", "json"]`, `imports = ["os.path"]`), 30, "allowlist.imports", []string{`"os.path" is not a top-level module name`}},
		{"module twice", edit(`imports = ["math", "json"]`, `imports = ["math", "math"]`), 30, "allowlist.imports", []string{"listed twice"}},
		{"unknown builtin", edit(`deny_builtins = ["eval", "open"]`, `deny_builtins = ["print"]`), 31, "allowlist.deny_builtins", []string{`"print" cannot be denied`, "getattr"}},
		{"bad event", edit(`deny_events = ["os.system"]`, `deny_events = ["os system"]`), 32, "allowlist.deny_events", []string{"not an audit event name"}},
		{"store_code string", edit("store_code = false", `store_code = "yes"`), 36, "audit.store_code", []string{"must be a boolean"}},
		{"env nested", base + "[env.X]\nY = \"1\"\n", 37, "env.X", []string{"must be a string, not a table"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tt.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %v (%T), want *Error", err, err)
			}
			if e.File != "t.toml" || e.Line != tt.line || e.Key != tt.key {
				t.Errorf("error at %s:%d key %q, want t.toml:%d key %q: %v", e.File, e.Line, e.Key, tt.line, tt.key, err)
			}
			for _, s := range tt.has {
				if !strings.Contains(e.Msg, s) {
					t.Errorf("message %q does not contain %q", e.Msg, s)
				}
			}
		})
	}
}
