package userns

import "testing"

func TestIsInitialMap(t *testing.T) {
	for s, want := range map[string]bool{
		"         0          0 4294967295\n": true,
		"0 1000 1\n":                         false,
		"0 1000 1\n1 100000 65536\n":         false,
		"":                                   false,
	} {
		if got := isInitialMap(s); got != want {
			t.Errorf("isInitialMap(%q) = %v, want %v", s, got, want)
		}
	}
}
