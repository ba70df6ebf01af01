package seccompprofiles

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"default", "strict"}) {
		t.Fatalf("Names() = %v, want [default strict]", got)
	}
}

// TestRead checks that every profile reads and is JSON (sandbox/seccomp
// validates the rest), and that nothing but a bare name is accepted.
func TestRead(t *testing.T) {
	for _, name := range Names() {
		b, err := Read(name)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Errorf("%s.json is not valid JSON", name)
		}
	}
	for _, bad := range []string{"", "default.json", "../seccomp-profiles/default", "x/default", "missing"} {
		if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), "default, strict") {
			t.Errorf("Read(%q): %v, want an error listing the profiles", bad, err)
		}
	}
}
