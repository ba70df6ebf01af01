package policies

import "testing"

// TestNear: a suggestion is offered for a likely misspelling, never for
// an unrelated name.
func TestNear(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"Timeout", "timeout", true}, // case
		{"timout", "timeout", true},  // one edit
		{"landlok", "landlock", true},
		{"time_out", "timeout", true}, // two edits, long enough
		{"mem", "memory", true},       // a prefix
		{"pid", "pids", true},
		{"foo", "root", false}, // two edits from a short name
		{"xy", "python", false},
		{"cpu", "cpus", true},
		{"tmp", "stack", false},
	} {
		if got := near(tc.a, tc.b); got != tc.want {
			t.Errorf("near(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
