package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata")

// fullHost can enforce everything.
var fullHost = plan.Host{
	Seccomp:  plan.Feature{OK: true},
	Landlock: plan.Landlock{ABI: 6},
	Cgroup:   plan.Feature{OK: true},
}

// bareHost has namespaces only.
var bareHost = plan.Host{
	Seccomp:  plan.Feature{Why: "kernel built without CONFIG_SECCOMP_FILTER"},
	Landlock: plan.Landlock{Why: "function not implemented"},
	Cgroup:   plan.Feature{Why: "controllers [memory pids] missing: mount them"},
}

// goldenCases are the policy files in and the plans out. A policy is a
// built-in name or a file under testdata.
var goldenCases = []struct {
	name   string
	policy string
	flags  Flags
	host   plan.Host
}{
	{"strict", "strict", Flags{}, fullHost},
	{"default", "default", Flags{}, fullHost},
	{"datasci", "datasci", Flags{}, fullHost},
	{"permissive", "permissive", Flags{}, fullHost},
	// The shipped permissive policy on a host without cgroups, seccomp or
	// Landlock: it requires only namespaces, so the run goes ahead
	// without them and the plan says so.
	{"permissive-bare-host", "permissive", Flags{}, bareHost},
	// strict requires seccomp: refused.
	{"strict-bare-host", "strict", Flags{}, bareHost},
	// Flags narrow; check mode and a file name reach the runner.
	{"strict-narrowed-check", "strict", Flags{Timeout: 2 * time.Second, OutputLimit: 4096, CheckOnly: true, Filename: "job.py"}, fullHost},
	// Flags never widen.
	{"strict-widened", "strict", Flags{Timeout: time.Hour}, fullHost},
	// A user policy: a path root, seccomp from a file, [env], "*" imports.
	{"custom", "testdata/custom.toml", Flags{}, fullHost},
	// loopback_sockets: the loopback variant of default's filter, and a
	// socket share of the memory for cgroup v1.
	{"loopback", "testdata/loopback.toml", Flags{}, fullHost},
	// Network allowlist mode: the proxy's allow list and limits, the
	// proxy environment, the filter variant with TCP sockets.
	{"allowlist", "testdata/allowlist.toml", Flags{}, fullHost},
	// --network none turns it off for the run: default's plan.
	{"allowlist-network-none", "testdata/allowlist.toml", Flags{NoNetwork: true}, fullHost},
	// memfd_noexec required, seccomp not: refused on a host without
	// seccomp by the planner itself (Unmet is nil here).
	{"memfd-required-bare-host", "testdata/memfd-required.toml", Flags{}, bareHost},
	{"memfd-required", "testdata/memfd-required.toml", Flags{}, fullHost},
	// Every process-creation event denied (default, datasci, loopback,
	// allowlist have the +noproc filter): not so with one allowed, and a
	// user's profile is left as it is.
	{"subprocess", "testdata/subprocess.toml", Flags{}, fullHost},
	{"custom-noproc", "testdata/custom-noproc.toml", Flags{}, fullHost},
	// Required landlock on a host without it: refused.
	{"custom-no-landlock", "testdata/custom.toml", Flags{}, plan.Host{Seccomp: plan.Feature{OK: true}, Landlock: plan.Landlock{Why: "function not implemented"}, Cgroup: plan.Feature{OK: true}}},
}

// TestGolden: for each case, Make's plan (or its error) as JSON equals
// testdata/NAME.plan.json. Run with -update to rewrite them after a
// deliberate change, and read the diff.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			var p *policies.Policy
			var err error
			if filepath.Ext(tc.policy) == ".toml" {
				p, err = policies.LoadFile(tc.policy)
			} else {
				p, err = policies.Builtin(tc.policy)
			}
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Ext(tc.policy) == ".toml" {
				p.Name = filepath.Base(tc.policy) // stable across checkouts
			}
			got := golden(t, p, tc.flags, tc.host)
			path := filepath.Join("testdata", tc.name+".plan.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./sandbox/planner -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("plan of %s differs from %s (run go test ./sandbox/planner -update and read the diff):\n%s", tc.policy, path, got)
			}
		})
	}
}

// golden is the JSON form of Make's answer: the plan, or the error and
// the plan of the refused run.
func golden(t *testing.T, p *policies.Policy, f Flags, h plan.Host) []byte {
	pl, err := Make(p, f, h)
	var v any = pl
	if err != nil {
		var se *result.SandboxError
		if !errors.As(err, &se) {
			t.Fatalf("Make error %T %v is not a *result.SandboxError", err, err)
		}
		v = map[string]any{"error": se, "refused plan": pl}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestMakeLeavesPolicyAlone: narrowing works on a copy.
func TestMakeLeavesPolicyAlone(t *testing.T) {
	p, err := policies.Builtin("strict")
	if err != nil {
		t.Fatal(err)
	}
	before := p.Limits
	if _, err := Make(p, Flags{Timeout: time.Second, OutputLimit: 2048}, fullHost); err != nil {
		t.Fatal(err)
	}
	if p.Limits != before {
		t.Errorf("Make changed the policy's limits: %+v, was %+v", p.Limits, before)
	}
}

// TestUnmetRequirements: hostcheck's answer refuses the run under step
// "requirements", with its text.
func TestUnmetRequirements(t *testing.T) {
	p, err := policies.Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	h := fullHost
	h.Unmet = &hostcheck.UnmetError{Missing: []string{"namespaces"}, Checks: []hostcheck.Check{{Name: "user namespace", Detail: "/proc/sys/user/max_user_namespaces is 0"}}}
	_, err = Make(p, Flags{}, h)
	var se *result.SandboxError
	if !errors.As(err, &se) || se.Step != "requirements" || se.Message != h.Unmet.Error() {
		t.Errorf("Make = %v, want step requirements with %q", err, h.Unmet)
	}
}

// TestEnv: the base environment, the thread pools from the CPU quota
// rounded up, then the policy's [env] sorted by name.
func TestEnv(t *testing.T) {
	p, err := policies.Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Env = map[string]string{"ZED": "1", "ALPHA": "x=y"}
	p.Limits.CPUs = 1.5
	pl, err := Make(p, Flags{}, fullHost)
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(spec.BaseEnv), "OMP_NUM_THREADS=2", "OPENBLAS_NUM_THREADS=2", "MKL_NUM_THREADS=2", "ALPHA=x=y", "ZED=1")
	if !slices.Equal(pl.Env, want) {
		t.Errorf("env %v, want %v", pl.Env, want)
	}
}

// TestPreload: only a warm sandbox's runner imports the policy's preload;
// a cold run and a check do not, and the runner's config accepts it.
func TestPreload(t *testing.T) {
	p, err := policies.Builtin("datasci")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Allowlist.Preload) == 0 {
		t.Fatal("datasci preloads nothing")
	}
	for _, tt := range []struct {
		name string
		f    Flags
		want []string
	}{
		{"cold", Flags{}, nil},
		{"warm", Flags{Warm: true}, p.Allowlist.Preload},
		{"check", Flags{Warm: true, CheckOnly: true}, nil},
	} {
		pl, err := Make(p, tt.f, fullHost)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pl.Runner.Preload, tt.want) {
			t.Errorf("%s: preload %v, want %v", tt.name, pl.Runner.Preload, tt.want)
		}
		c := pl.Runner
		c.ReportFD = 3 // the supervisor's
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
