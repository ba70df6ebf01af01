package pyrunner

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestArgv(t *testing.T) {
	argv, err := Argv("/usr/bin/python3.11", Config{Mode: ModeRun, ReportFD: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 7 || !reflect.DeepEqual(argv[:5], []string{"/usr/bin/python3.11", "-S", "-s", "-P", "-c"}) ||
		argv[5] != Source {
		t.Fatalf("argv %q", argv[:5])
	}
	want := `{"mode":"run","allow":null,"deny_builtins":null,"deny_events":null,"strict_attrs":false,` +
		`"report_fd":3,"filename":"<program>"}`
	if argv[6] != want {
		t.Errorf("config\n got %s\nwant %s", argv[6], want)
	}

	// nil and empty allowlists differ: no checks, and nothing allowed.
	argv, err = Argv("python", Config{Mode: ModeCheck, Allow: []string{}, ReportFD: 4,
		Filename: "job.py", WritableDirs: []string{"/out"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(argv[6]), &got); err != nil {
		t.Fatal(err)
	}
	if a, ok := got["allow"].([]any); !ok || len(a) != 0 || got["filename"] != "job.py" ||
		got["mode"] != "check" || !reflect.DeepEqual(got["writable_dirs"], []any{"/out"}) {
		t.Errorf("config %s", argv[6])
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Mode: ModeRun, ReportFD: 3}
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
		{with(ok, func(c *Config) { c.Filename = "a\x00b" }), "filename"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.cfg, err, tc.want)
		}
		if _, err := Argv("python", tc.cfg); err == nil {
			t.Errorf("Argv accepted %+v", tc.cfg)
		}
	}
	if _, err := Argv("", ok); err == nil {
		t.Error("Argv accepted no interpreter")
	}
	full := Config{Mode: ModeRun, Allow: DatasciAllow, DenyBuiltins: StrictDenyBuiltins,
		DenyEvents: StrictDenyEvents, StrictAttrs: true, ReportFD: 3}
	if err := full.Validate(); err != nil {
		t.Errorf("shipped lists: %v", err)
	}
}

// TestSourceFitsArgv: the runner travels as one argv element, which Linux
// caps at MAX_ARG_STRLEN (32 pages).
func TestSourceFitsArgv(t *testing.T) {
	if len(Source) > 128<<10-1 {
		t.Errorf("runner.py is %d bytes; one argv string holds at most %d", len(Source), 128<<10-1)
	}
	if strings.ContainsRune(Source, 0) {
		t.Error("runner.py contains NUL")
	}
}
