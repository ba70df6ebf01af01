package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// siteState prints what site sets up, as JSON, and whether site ran.
const siteState = `import sys, json
print(json.dumps({
    "path": sys.path, "prefix": sys.prefix, "exec_prefix": sys.exec_prefix,
    "base_prefix": sys.base_prefix, "home": getattr(sys, "_home", "unset"),
    "exit": repr(exit), "quit": repr(quit), "copyright": repr(copyright),
    "credits": repr(credits), "license": repr(license), "help": repr(help),
    "types": [type(o).__module__ + "." + type(o).__name__
              for o in (exit, quit, copyright, credits, license, help)],
    "site_module": "site" in sys.modules,
}))
`

// TestSiteEmulation: the runner starts the interpreter with -S and does
// site's work for the root's venv itself. What the program sees must be
// what the real site.main() gives the same interpreter in the same root
// (run here as a child with site), and the fast path must actually be
// taken in nsbox's roots (site never imported).
func TestSiteEmulation(t *testing.T) {
	needRoot(t)
	for _, pol := range []string{"default", "datasci"} {
		t.Run(pol, func(t *testing.T) {
			code := siteState + `
import subprocess
out = subprocess.run([sys.executable, "-s", "-P", "-c", ` + "'''" + siteState + "'''" + `],
                     capture_output=True, text=True, check=True).stdout
print(out, end="")
`
			o := runPy(t, pol, code)
			o.wantStatus(t, result.StatusOK)
			lines := strings.Split(strings.TrimSpace(o.res.Stdout), "\n")
			if len(lines) != 2 {
				t.Fatalf("want two lines, got %q (stderr %q)", o.res.Stdout, o.res.Stderr)
			}
			var runner, real map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &runner); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(lines[1]), &real); err != nil {
				t.Fatal(err)
			}
			if runner["site_module"] != false || real["site_module"] != true {
				t.Errorf("site imported: runner %v, child with site %v; want false, true",
					runner["site_module"], real["site_module"])
			}
			delete(runner, "site_module")
			delete(real, "site_module")
			a, _ := json.Marshal(runner)
			b, _ := json.Marshal(real)
			if string(a) != string(b) {
				t.Errorf("runner's site emulation differs from site.main():\n runner %s\n   site %s", a, b)
			}
			if p, _ := runner["prefix"].(string); p != "/venv" {
				t.Errorf("sys.prefix %q, want /venv", p)
			}
		})
	}
}
