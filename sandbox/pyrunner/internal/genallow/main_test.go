package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGeneratedAreCurrent fails when allowlists_gen.go or a policy's
// generated imports_add block is not what the locks give: a lock was
// regenerated and `go generate ./sandbox/pyrunner/` was not run, or a
// generated part was edited by hand.
func TestGeneratedAreCurrent(t *testing.T) {
	files, err := generate("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("../../../..", f.path))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(f.data) {
			t.Errorf("%s is stale: run go generate ./sandbox/pyrunner/", f.path)
		}
	}
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLockImports(t *testing.T) {
	good := "# header\n\n# a.whl; needed by: top level\n# imports: b, a\nA==1 \\\n    --hash=sha256:00\n\n" +
		"# c.whl\n# imports: (none)\nc==2 \\\n    --hash=sha256:11\n"
	names, err := lockImports(writeTemp(t, "good.lock", good))
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("lockImports = %q, %v; want [a b]", names, err)
	}
	for _, tc := range []struct{ name, text, errHas string }{
		{"no imports line", "# a.whl\nA==1 \\\n", `entry A==1 has no "# imports:" line`},
		{"two imports lines", "# imports: a\n# imports: b\nA==1\n", "a second"},
		{"private name", "# imports: _a\nA==1\n", `"_a" is not a public module name`},
		{"not a name", "# imports: a.b\nA==1\n", `"a.b" is not a public module name`},
		{"dangling", "# imports: a\nA==1\n# imports: b\n", "no entry after it"},
		{"empty", "# header only\n", "no entries"},
		{"duplicate", "# imports: a\nA==1\n# imports: a\nB==1\n", "provide the same import name: a"},
	} {
		_, err := lockImports(writeTemp(t, "x.lock", tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.errHas)
		}
	}
}

func TestReplaceBlock(t *testing.T) {
	begin := "  # generated from policies/r.lock by go generate ./sandbox/pyrunner: begin\n"
	text := "[allowlist]\nimports_add = [\n  \"ssl\",\n" + begin + "  \"old\",\n  " + markerEnd + "\n]\n"
	got, err := replaceBlock(text, "r", []string{"x", "y"})
	want := "[allowlist]\nimports_add = [\n  \"ssl\",\n" + begin + "  \"x\", \"y\",\n  " + markerEnd + "\n]\n"
	if err != nil || got != want {
		t.Errorf("replaceBlock = %q, %v\nwant %q", got, err, want)
	}
	if _, err := replaceBlock("imports_add = []\n", "r", []string{"x"}); err == nil ||
		!strings.Contains(err.Error(), "no generated block") {
		t.Errorf("no markers: %v", err)
	}
	if _, err := replaceBlock(begin+begin+markerEnd+"\n", "r", nil); err == nil ||
		!strings.Contains(err.Error(), "twice") {
		t.Errorf("two begin markers: %v", err)
	}
}
