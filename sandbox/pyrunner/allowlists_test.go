package pyrunner

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestAllowlistsShape(t *testing.T) {
	for name, l := range map[string][]string{
		"StrictAllow": StrictAllow, "DefaultAllow": DefaultAllow, "DatasciAllow": DatasciAllow,
		"DatasciPackages": DatasciPackages, "WebStdlib": WebStdlib, "WebPackages": WebPackages,
		"WebAllow": WebAllow, "DatasciMinPackages": DatasciMinPackages, "DatasciMinAllow": DatasciMinAllow,
	} {
		if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
			t.Errorf("%s is not sorted and unique", name)
		}
	}
	for _, m := range StrictAllow {
		if !slices.Contains(DefaultAllow, m) {
			t.Errorf("strict allows %s, default does not", m)
		}
	}
	for _, m := range DefaultAllow {
		if _, ok := DefaultDeny[m]; ok || strings.HasPrefix(m, "_") {
			t.Errorf("DefaultAllow holds %s", m)
		}
	}
	for _, m := range []string{"os", "sys", "subprocess", "socket", "ctypes", "importlib", "pickle",
		"builtins", "types", "threading", "signal", "inspect", "gc"} {
		if slices.Contains(StrictAllow, m) {
			t.Errorf("StrictAllow holds %s", m)
		}
	}
	for _, b := range StrictDenyBuiltins {
		if !slices.Contains(DenyableBuiltins, b) {
			t.Errorf("StrictDenyBuiltins holds %s", b)
		}
	}
	if !slices.Contains(DatasciAllow, "pandas") || !slices.Contains(DatasciAllow, "os") {
		t.Error("DatasciAllow lacks pandas or os")
	}
	// datasci is datasci-min and more: a program for the leaner root runs
	// on the fuller one.
	for _, m := range DatasciMinPackages {
		if !slices.Contains(DatasciPackages, m) {
			t.Errorf("datasci-min has %s, datasci does not", m)
		}
	}
	for _, m := range []string{"scipy", "seaborn", "sklearn", "statsmodels", "openpyxl", "pyarrow"} {
		if !slices.Contains(DatasciPackages, m) || slices.Contains(DatasciMinPackages, m) {
			t.Errorf("%s: want it in datasci only", m)
		}
	}
	for _, m := range WebStdlib {
		if _, ok := DefaultDeny[m]; !ok {
			t.Errorf("WebStdlib holds %s, which DefaultAllow allows already", m)
		}
	}
	for _, m := range []string{"subprocess", "ctypes", "multiprocessing", "socketserver", "smtplib"} {
		if slices.Contains(WebAllow, m) {
			t.Errorf("WebAllow holds %s", m)
		}
	}
}

// TestDefaultAllowMatchesInterpreter: DefaultAllow is exactly the public
// names of sys.stdlib_module_names minus DefaultDeny, for the interpreter
// the base root is built from.
func TestDefaultAllowMatchesInterpreter(t *testing.T) {
	requirePython(t)
	out, err := exec.Command(python, "-I", "-c",
		"import sys; print('\\n'.join(sorted(sys.stdlib_module_names)))").Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range strings.Fields(string(out)) {
		if _, denied := DefaultDeny[m]; !denied && !strings.HasPrefix(m, "_") {
			want = append(want, m)
		}
	}
	if !slices.Equal(want, DefaultAllow) {
		t.Errorf("DefaultAllow differs from the interpreter's stdlib minus DefaultDeny:\nwant %q", want)
	}
	for m := range DefaultDeny {
		if !slices.Contains(strings.Fields(string(out)), m) {
			t.Errorf("DefaultDeny names %s, which is not a standard module", m)
		}
	}
}

// TestShippedListsWork imports every module of each shipped list under its
// policy's layer: none may trip a violation (modules the host lacks, such
// as curses without its C part, may fail to import for their own reasons).
func TestShippedListsWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		mods []string
	}{
		{"strict", Config{Mode: ModeRun, Allow: StrictAllow, DenyBuiltins: StrictDenyBuiltins,
			DenyEvents: StrictDenyEvents, StrictAttrs: true}, StrictAllow},
		{"default", Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
			DenyEvents: DefaultDenyEvents}, DefaultAllow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var prog strings.Builder
			for _, m := range tc.mods {
				if m == "this" || m == "antigravity" { // prints the Zen / opens a browser
					continue
				}
				prog.WriteString("try:\n    import " + m + "\nexcept ImportError as e:\n" +
					"    if 'policy' in str(e): raise\n")
			}
			prog.WriteString("print('ok')\n")
			r := runProgram(t, tc.cfg, prog.String(), "")
			if r.exit != 0 || r.stdout != "ok\n" || len(r.report.Violations) != 0 {
				t.Errorf("%s", r)
			}
		})
	}
	// The web policy's list, with its root's packages, under a proxy:
	// importing them (urllib3 probes IPv6 with a stream socket) trips
	// nothing.
	t.Run("web", func(t *testing.T) {
		site := rootSite(t, "web", "requests")
		var prog strings.Builder
		for _, m := range WebAllow {
			if m == "this" || m == "antigravity" {
				continue
			}
			prog.WriteString("try:\n    import " + m + "\nexcept ImportError as e:\n" +
				"    if 'policy' in str(e): raise\n")
		}
		prog.WriteString("print('ok')\n")
		cfg := Config{Mode: ModeRun, Allow: WebAllow, DenyBuiltins: DefaultDenyBuiltins,
			DenyEvents: DefaultDenyEvents, Proxy: "127.0.0.1:3128"}
		r := runProgramEnv(t, cfg, prog.String(), "", []string{"PYTHONPATH=" + site})
		if r.exit != 0 || r.stdout != "ok\n" || len(r.report.Violations) != 0 {
			t.Errorf("%s", r)
		}
	})
	// The default policy's events leave asyncio's event loop working.
	cfg := Config{Mode: ModeRun, Allow: DefaultAllow, DenyBuiltins: DefaultDenyBuiltins,
		DenyEvents: DefaultDenyEvents}
	r := runProgram(t, cfg, "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    return 5\nprint(asyncio.run(f()))\n", "")
	if r.exit != 0 || r.stdout != "5\n" {
		t.Errorf("asyncio under the default events:\n%s", r)
	}
}
