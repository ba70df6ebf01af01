package policies_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/policies/internal/refpage"
)

// TestReferencePageFresh regenerates docs/policies.md in memory and fails
// when the checked-in page differs: the page is derived from the key
// table and the built-ins, and must change with them.
func TestReferencePageFresh(t *testing.T) {
	want, err := refpage.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "docs", "policies.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/policies.md is stale: run go generate ./policies")
	}
}

// TestReferencePageExamples parses every TOML example of the page.
func TestReferencePageExamples(t *testing.T) {
	page, err := refpage.Render()
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllSubmatch(page, -1)
	if len(blocks) == 0 {
		t.Fatal("no TOML example in the page")
	}
	for _, b := range blocks {
		if _, err := policies.Parse("example.toml", b[1]); err != nil {
			t.Errorf("example does not parse: %v\n%s", err, b[1])
		}
	}
	for _, k := range policies.Keys() {
		line := k.Line()
		if k.Section() != "" {
			line = "[" + k.Section() + "]\n" + line
		}
		if _, err := policies.Parse("example.toml", []byte("extends = \"default\"\n"+line+"\n")); err != nil && k.Name != "extends" {
			t.Errorf("%s: the example %q does not parse: %v", k.Name, k.Line(), err)
		}
	}
}
