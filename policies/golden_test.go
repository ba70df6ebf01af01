package policies

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestBuiltinGolden pins every value of each built-in policy, as resolved,
// to testdata/builtin-NAME.json: rewriting a shipped file (shorter
// comments, extends instead of repeated keys) must not change what a run
// gets. The hash is left out: it covers the file's text, which such a
// rewrite changes. Regenerate with go test ./policies -run Golden -update
// only when a value is meant to change.
func TestBuiltinGolden(t *testing.T) {
	for _, name := range BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			p, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			p.SHA256 = ""
			got, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "builtin-"+name+".json")
			if *update {
				must(t, os.MkdirAll("testdata", 0o755))
				must(t, os.WriteFile(path, got, 0o644))
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("built-in %s resolves to\n%s\nwant (%s)\n%s", name, got, path, want)
			}
		})
	}
}
