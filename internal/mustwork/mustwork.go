// Package mustwork is the one place that decides whether a test may skip
// because this host lacks something. With NSBOX_MUST_WORK=1 (set by CI) a
// skip becomes a failure, so CI cannot go green by skipping a protection.
package mustwork

import (
	"fmt"
	"os"
	"testing"
)

// Enabled reports whether NSBOX_MUST_WORK=1.
func Enabled() bool { return os.Getenv("NSBOX_MUST_WORK") == "1" }

// Skip skips tb with the reason, or fails it when Enabled.
func Skip(tb testing.TB, format string, args ...any) {
	tb.Helper()
	reason := fmt.Sprintf(format, args...)
	if Enabled() {
		tb.Fatalf("NSBOX_MUST_WORK=1 but %s", reason)
	}
	tb.Skip(reason)
}

// NeedRoot skips (or fails, see Skip) unless running as root.
func NeedRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Skip(tb, "not running as root (the sandbox needs CAP_SYS_ADMIN)")
	}
}

// NeedPath skips (or fails) when the host has no path.
func NeedPath(tb testing.TB, path string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		Skip(tb, "host has no %s: %v", path, err)
	}
}
