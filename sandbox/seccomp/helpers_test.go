package seccomp

import (
	"os"
	"testing"
)

func mustLoad(t testing.TB, name string) *Profile {
	t.Helper()
	p, err := Load(name)
	if err != nil {
		t.Fatalf("Load(%q): %v", name, err)
	}
	return p
}

// mustWork reports whether a host limitation must fail the test rather
// than skip it (CI sets NSBOX_MUST_WORK=1).
func mustWork() bool { return os.Getenv("NSBOX_MUST_WORK") == "1" }
