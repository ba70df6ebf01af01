package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestRestrictedStrict: under the built-in strict policy (python.mode
// "restricted") an ordinary program with classes, properties, super(),
// augmented assignment to attributes and items, unpacking and a format
// string runs and prints python's own output; a traceback shows only the
// program's lines.
func TestRestrictedStrict(t *testing.T) {
	needRoot(t)
	prog := `import json
from dataclasses import dataclass
from collections import Counter

@dataclass
class Item:
    name: str
    qty: int = 0

class Base:
    def __init__(self, label):
        self.label = label
class Store(Base):
    def __init__(self, label):
        super().__init__(label)
        self.items = {}
    @property
    def total(self):
        return sum(i.qty for i in self.items.values())
    def add(self, name, qty):
        self.items.setdefault(name, Item(name)).qty += qty

s = Store("main")
for name, qty in [("a", 2), ("b", 3), ("a", 1)]:
    s.add(name, qty)
c = Counter({k: v.qty for k, v in s.items.items()})
first, *rest = sorted(c)
print(s.label, s.total, json.dumps(dict(c), sort_keys=True), first, rest, "{:>4}|".format(s.total))
`
	o := runPyLayer(t, "strict", prog)
	o.wantStatus(t, result.StatusOK)
	if want := "main 6 {\"a\": 3, \"b\": 3} a ['b']    6|\n"; o.res.Stdout != want {
		t.Errorf("stdout %q, want %q", o.res.Stdout, want)
	}
	o = runPyLayer(t, "strict", "class A:\n    def f(self):\n        raise ValueError('boom')\nA().f()\n")
	o.wantStatus(t, result.StatusError)
	if !strings.Contains(o.res.Stderr, `File "<program>", line 4`) || !strings.Contains(o.res.Stderr, `File "<program>", line 3, in f`) ||
		strings.Count(o.res.Stderr, "File \"") != 2 {
		t.Errorf("traceback %q, want exactly the program's two frames", o.res.Stderr)
	}
}

// TestRestrictedRefusals: through the real binary and sandbox, strict
// refuses before anything runs a match statement and a computed-attribute
// route, and at run time a format-string route; RestrictedPython itself
// cannot be imported under strict or default (it is the runner's, in a
// directory of its own).
func TestRestrictedRefusals(t *testing.T) {
	needRoot(t)
	cases := []struct {
		policy, name, code string
		static             bool   // refused before anything ran
		violation          string // a violation name the result must list
	}{
		{"strict", "match", "match 1:\n    case int():\n        pass", true, "match"},
		{"strict", "metaclass", "class M(type):\n    pass\nclass C(metaclass=M):\n    pass", true, "metaclass"},
		{"strict", "subclass walk", "().__class__.__base__.__subclasses__()", true, "__base__"},
		{"strict", "format string", "print('{0.__class__.__base__}'.format(()))", false, "__base__"},
		{"strict", "import RestrictedPython", "import RestrictedPython", true, "RestrictedPython"},
		{"default", "import RestrictedPython", "import RestrictedPython", true, "RestrictedPython"},
	}
	for _, tc := range cases {
		t.Run(tc.policy+" "+tc.name, func(t *testing.T) {
			ws := sandboxWorkspace(t)
			code := "open('/workspace/ran', 'w').close()\n" + tc.code + "\nopen('/workspace/after', 'w').close()\n"
			o := nsbox(t, run{args: []string{"run", "--json", "--policy", tc.policy, "--workspace", ws, "-c", code}})
			o.wantStatus(t, result.StatusPolicyViolation)
			_, err := os.Stat(filepath.Join(ws, "ran"))
			if ran := err == nil; ran == tc.static {
				t.Errorf("program ran: %v, want %v (static: %v)", ran, !tc.static, tc.static)
			}
			if _, err := os.Stat(filepath.Join(ws, "after")); err == nil {
				t.Errorf("the line after the refused one ran")
			}
			found := false
			for _, v := range o.res.Violations {
				found = found || v.Name == tc.violation
			}
			if !found {
				t.Errorf("violations %+v do not name %q", o.res.Violations, tc.violation)
			}
		})
	}
}
