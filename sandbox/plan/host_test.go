package plan

import (
	"os"
	"testing"
)

// TestReadHostHere: the host this test runs on is read without error and,
// where the suite must work (CI), can enforce what the shipped policies
// require.
func TestReadHostHere(t *testing.T) {
	h := ReadHost([]string{"namespaces", "cgroups", "seccomp"})
	if os.Getenv("NSBOX_MUST_WORK") == "1" && (h.Unmet != nil || !h.Seccomp.OK || !h.Cgroup.OK) {
		t.Errorf("ReadHost on a host that must work: %+v (unmet: %v)", h, h.Unmet)
	}
	if !h.Seccomp.OK && h.Seccomp.Why == "" || !h.Cgroup.OK && h.Cgroup.Why == "" || h.Landlock.ABI == 0 && h.Landlock.Why == "" {
		t.Errorf("a missing protection without a reason: %+v", h)
	}
}
