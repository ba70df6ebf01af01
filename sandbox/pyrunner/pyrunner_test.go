package pyrunner

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestArgv(t *testing.T) {
	pyc := CompiledPath()
	argv, err := Argv("/usr/bin/python3.11", pyc, Config{Mode: ModeRun, ReportFD: 3,
		WritableDirs: []string{"/workspace"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 6 || !reflect.DeepEqual(argv[:5], []string{"/usr/bin/python3.11", "-S", "-s", "-P", pyc}) {
		t.Fatalf("argv %q", argv)
	}
	// The protocol's constants come from Go, whatever the caller set.
	want := `{"mode":"run","allow":null,"deny_builtins":null,"deny_events":null,"strict_attrs":false,` +
		`"report_fd":3,"filename":"<program>","writable_dirs":["/workspace"],` +
		`"outputs":false,"preload":[],"max_output_bytes":4194304,"proxy":null,` +
		`"python_mode":"guarded","restricted_lib":"",` +
		`"max_violation_lines":1000,"exit_policy_violation":126,"exit_syntax_error":1}`
	if argv[5] != want {
		t.Errorf("config\n got %s\nwant %s", argv[5], want)
	}

	// nil and empty allowlists differ: no checks, and nothing allowed.
	argv, err = Argv("python", pyc, Config{Mode: ModeCheck, Allow: []string{}, ReportFD: 4,
		Filename: "job.py", WritableDirs: []string{"/out"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(argv[5]), &got); err != nil {
		t.Fatal(err)
	}
	if a, ok := got["allow"].([]any); !ok || len(a) != 0 || got["filename"] != "job.py" || got["proxy"] != nil ||
		got["mode"] != "check" || !reflect.DeepEqual(got["writable_dirs"], []any{"/out"}) {
		t.Errorf("config %s", argv[5])
	}
	if _, err := Argv("python", "", Config{Mode: ModeRun, ReportFD: 3, WritableDirs: []string{"/w"}}); err == nil {
		t.Error("Argv accepted no runner")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Mode: ModeRun, ReportFD: 3, WritableDirs: []string{"/workspace"}}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{with(ok, func(c *Config) { c.Mode = "" }), "mode"},
		{with(ok, func(c *Config) { c.ReportFD = 2 }), "report_fd"},
		{with(ok, func(c *Config) { c.Allow = []string{"os.path"} }), "top-level module name"},
		{with(ok, func(c *Config) { c.Allow = []string{"1x"} }), "top-level module name"},
		{with(ok, func(c *Config) { c.DenyBuiltins = []string{"print"} }), "deny_builtins"},
		{with(ok, func(c *Config) { c.DenyEvents = []string{" os.system"} }), "deny_events"},
		{with(ok, func(c *Config) { c.WritableDirs = []string{"tmp"} }), "writable_dirs"},
		{with(ok, func(c *Config) { c.WritableDirs = nil }), "writable_dirs: required"},
		{with(ok, func(c *Config) { c.WritableDirs = []string{} }), "writable_dirs: required"},
		{with(ok, func(c *Config) { c.Filename = "a\x00b" }), "filename"},
		{with(ok, func(c *Config) { c.Preload = []string{"pandas"}; c.Allow = []string{"numpy"} }), "not allowed by allow"},
		{with(ok, func(c *Config) { c.Preload = []string{"os..path"} }), "not a module name"},
		{with(ok, func(c *Config) { c.Preload = []string{"math"}; c.Mode = ModeCheck }), "mode check"},
		{with(ok, func(c *Config) { c.MaxOutputBytes = -1 }), "max_output_bytes"},
		{with(ok, func(c *Config) { c.MaxOutputBytes = MaxOutputBytesCeiling + 1 }), "max_output_bytes"},
		// The runner compares the program's addresses with the proxy's as
		// spelt: only the canonical loopback IPv4 form is accepted.
		{with(ok, func(c *Config) { c.Proxy = "127.0.0.1" }), "proxy"},
		{with(ok, func(c *Config) { c.Proxy = "10.0.0.1:3128" }), "proxy"},
		{with(ok, func(c *Config) { c.Proxy = "[::1]:3128" }), "proxy"},
		{with(ok, func(c *Config) { c.Proxy = "127.0.0.1:0" }), "proxy"},
		{with(ok, func(c *Config) { c.Proxy = "localhost:3128" }), "proxy"},
		{with(ok, func(c *Config) { c.Proxy = "127.0.0.01:3128" }), "proxy"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.cfg, err, tc.want)
		}
		if _, err := Argv("python", CompiledPath(), tc.cfg); err == nil {
			t.Errorf("Argv accepted %+v", tc.cfg)
		}
	}
	if _, err := Argv("", CompiledPath(), ok); err == nil {
		t.Error("Argv accepted no interpreter")
	}
	full := Config{Mode: ModeRun, Allow: DatasciAllow, DenyBuiltins: StrictDenyBuiltins,
		DenyEvents: StrictDenyEvents, StrictAttrs: true, ReportFD: 3, WritableDirs: []string{"/workspace"},
		Proxy: "127.0.0.1:3128"}
	if err := full.Validate(); err != nil {
		t.Errorf("shipped lists: %v", err)
	}
}

// TestExitRunnerMirrored: the runner needs ExitRunnerError before it has
// read its config, so its source states it (EXIT_RUNNER); the one
// constant the two sides both write must be equal.
func TestExitRunnerMirrored(t *testing.T) {
	m := regexp.MustCompile(`(?m)^EXIT_RUNNER = (\d+)\b`).FindAllStringSubmatch(Source, -1)
	if len(m) != 1 {
		t.Fatalf("want one EXIT_RUNNER assignment in the runner, found %d", len(m))
	}
	if m[0][1] != strconv.Itoa(ExitRunnerError) {
		t.Errorf("runner's EXIT_RUNNER is %s, pyrunner.ExitRunnerError is %d", m[0][1], ExitRunnerError)
	}
}
