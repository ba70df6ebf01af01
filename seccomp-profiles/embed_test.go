package seccompprofiles

import (
	"encoding/json"
	"runtime"
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

// TestCompiled checks the generated table against the profiles: a golden
// for every built-in profile and nothing else, each for this binary's
// architecture's table, and handed out as a copy.
func TestCompiled(t *testing.T) {
	if len(goldens) == 0 {
		// gen's TestGoldens fails on such an architecture.
		t.Skipf("no goldens for %s", runtime.GOARCH)
	}
	var filters []string
	for _, name := range Names() {
		// Each profile and its variants (sandbox/seccomp.LoopbackSuffix,
		// ProxySuffix), and for default, which allows processes, each of
		// those with NoProcSuffix.
		these := []string{name, name + "+loopback", name + "+proxy"}
		filters = append(filters, these...)
		if name == "default" {
			for _, f := range these {
				filters = append(filters, f+"+noproc")
			}
		}
	}
	for _, name := range filters {
		f, ok := Compiled(name)
		if !ok {
			t.Errorf("Compiled(%q): no golden", name)
			continue
		}
		if f.File != name+"."+runtime.GOARCH+".bpf" || f.Arch == "" || len(f.ProfileSHA256) != 64 || len(f.BPF) == 0 {
			t.Errorf("Compiled(%q) = %s %s %s, %d bytes", name, f.File, f.Arch, f.ProfileSHA256, len(f.BPF))
		}
		f.BPF[0] ^= 0xff
		if again, _ := Compiled(name); again.BPF[0] == f.BPF[0] {
			t.Errorf("Compiled(%q): the caller's change reached the next call", name)
		}
	}
	if len(goldens) != len(filters) {
		t.Errorf("%d goldens for %d filters (%d profiles)", len(goldens), len(filters), len(Names()))
	}
	for _, name := range []string{"", "missing", "default.json"} {
		if _, ok := Compiled(name); ok {
			t.Errorf("Compiled(%q): ok, want none", name)
		}
	}
}
