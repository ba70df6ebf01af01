package hostcheck

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/cgroup"
)

func TestMissing(t *testing.T) {
	r := Report{Checks: []Check{
		{Name: "user namespace", Group: Namespaces, OK: true},
		{Name: "mount namespace", Group: Namespaces, OK: true},
		{Name: "cgroups", Group: Cgroups, OK: true},
		{Name: "cgroup controller pids", Group: Cgroups, OK: false},
		{Name: "seccomp", Group: Seccomp, OK: true},
		{Name: "proc subset=pid", OK: false}, // informational: never makes a requirement missing
	}}
	for _, tc := range []struct {
		reqs, want []string
	}{
		{nil, nil},
		{[]string{Namespaces, Seccomp}, nil},
		{[]string{Namespaces, Cgroups, Seccomp}, []string{Cgroups}},
		{[]string{Landlock}, []string{Landlock}},        // no check at all: fail closed
		{[]string{"bogus", Seccomp}, []string{"bogus"}}, // unknown: cannot be met
		{[]string{""}, []string{""}},                    // "" is the informational group, not a requirement
	} {
		if got := r.Missing(tc.reqs); !slices.Equal(got, tc.want) {
			t.Errorf("Missing(%q) = %q, want %q", tc.reqs, got, tc.want)
		}
	}
	if f := r.Failed(); len(f) != 2 || f[0].Name != "cgroup controller pids" {
		t.Errorf("Failed() = %+v", f)
	}
}

func TestUnmetError(t *testing.T) {
	e := &UnmetError{
		Missing: []string{Cgroups, Seccomp},
		Checks: []Check{
			{Name: "cgroup controller memory", Detail: "not usable", Hint: "delegate them"},
			{Name: "cgroup controller pids", Detail: "not usable", Hint: "delegate them"},
			{Name: "seccomp", Detail: "no filter mode", Hint: "CONFIG_SECCOMP_FILTER"},
		},
	}
	got := e.Error()
	want := "this host cannot enforce the required cgroups, seccomp: cgroup controller memory: not usable; " +
		"cgroup controller pids: not usable; seccomp: no filter mode. To fix: delegate them; CONFIG_SECCOMP_FILTER. " +
		"Run `nsbox doctor` for details"
	if got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	var ue *UnmetError
	if !errors.As(error(e), &ue) {
		t.Error("errors.As")
	}
}

func TestCgroupChecks(t *testing.T) {
	names := func(cs []Check) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}

	// v1: cpuacct is usable but not needed, so it gets no check.
	v1 := cgroupChecks(cgroup.Info{Version: 1, Controllers: map[string]string{
		"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "cpu": "/sys/fs/cgroup/cpu",
		"cpuacct": "/sys/fs/cgroup/cpuacct", "freezer": "/sys/fs/cgroup/freezer",
	}, Sockets: "memory.kmem.tcp.limit_in_bytes"}, nil)
	want := []string{"cgroups", "cgroup controller memory", "cgroup controller pids", "cgroup controller cpu", "cgroup controller freezer",
		"cgroup socket memory"}
	if got := names(v1); !slices.Equal(got, want) {
		t.Errorf("v1 checks %v, want %v", got, want)
	}
	for _, c := range v1 {
		if !c.OK || c.Group != Cgroups || c.MinKernel == "" {
			t.Errorf("v1: %+v", c)
		}
	}

	// v2 with memory not delegated: its check fails with the package's hint.
	v2 := cgroupChecks(cgroup.Info{Version: 2, Controllers: map[string]string{"pids": "/sys/fs/cgroup", "cpu": "/sys/fs/cgroup"},
		Missing: []string{"memory"}, Hint: "Delegate=yes", Sockets: "memory.max"}, nil)
	want = []string{"cgroups", "cgroup controller memory", "cgroup controller pids", "cgroup controller cpu", "cgroup socket memory"}
	if got := names(v2); !slices.Equal(got, want) {
		t.Errorf("v2 checks %v, want %v", got, want)
	}
	if v2[0].Detail != "v2 (unified)" || v2[0].MinKernel != "4.5" {
		t.Errorf("v2 hierarchy: %+v", v2[0])
	}
	if c := v2[1]; c.OK || c.Hint != "Delegate=yes" {
		t.Errorf("v2 memory: %+v", c)
	}
	r := Report{Checks: v2}
	if m := r.Missing([]string{Cgroups}); !slices.Equal(m, []string{Cgroups}) {
		t.Errorf("Missing = %v", m)
	}

	// v2 booted with cgroup.memory=nosocket: socket buffers uncounted, so
	// the cgroups requirement fails, with the package's hint.
	nosock := cgroupChecks(cgroup.Info{Version: 2, Controllers: map[string]string{"memory": "/sys/fs/cgroup", "pids": "/sys/fs/cgroup", "cpu": "/sys/fs/cgroup"},
		Missing: []string{cgroup.SocketMemory}, Hint: "remove nosocket"}, nil)
	if got := names(nosock); !slices.Equal(got, want) {
		t.Errorf("v2 nosocket checks %v, want %v", got, want)
	}
	if c := nosock[len(nosock)-1]; c.OK || c.Hint != "remove nosocket" {
		t.Errorf("v2 nosocket: %+v", c)
	}
	if m := (Report{Checks: nosock}).Missing([]string{Cgroups}); !slices.Equal(m, []string{Cgroups}) {
		t.Errorf("v2 nosocket: Missing = %v", m)
	}

	// Detect failed: one failing check with a generic hint.
	bad := cgroupChecks(cgroup.Info{}, errors.New("no cgroup mounts"))
	if len(bad) != 1 || bad[0].OK || bad[0].Hint == "" || !strings.Contains(bad[0].Detail, "no cgroup mounts") {
		t.Errorf("detect error: %+v", bad)
	}
}

// TestCgroupDelegationCheck: in rootless mode the cgroups requirement also
// needs a usable delegated subtree, and doctor says where it is or why
// there is none, with the package's fix.
func TestCgroupDelegationCheck(t *testing.T) {
	scope := "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
	at := map[string]string{"memory": scope, "pids": scope, "cpu": scope}
	ok := cgroupChecks(cgroup.Info{Version: 2, Controllers: at, Sockets: "memory.max",
		Delegation: &cgroup.Delegation{Path: scope, Usable: true}}, nil)
	if len(ok) < 2 || ok[1].Name != "cgroup delegation" || !ok[1].OK || ok[1].Group != Cgroups ||
		!strings.Contains(ok[1].Detail, scope+"/"+cgroup.LeafName) {
		t.Errorf("usable delegation: %+v", ok)
	}
	if m := (Report{Checks: ok}).Missing([]string{Cgroups}); len(m) != 0 {
		t.Errorf("usable delegation: Missing = %v", m)
	}

	no := cgroupChecks(cgroup.Info{Version: 2, Controllers: map[string]string{}, Missing: []string{"memory", "pids", "cpu"},
		Hint: "systemd-run --user --scope -p Delegate=yes", Sockets: "memory.max",
		Delegation: &cgroup.Delegation{Path: scope, Why: scope + " is not delegated"}}, nil)
	if c := no[1]; c.Name != "cgroup delegation" || c.OK || c.Detail != "rootless: "+scope+" is not delegated" ||
		c.Hint != "systemd-run --user --scope -p Delegate=yes" {
		t.Errorf("no delegation: %+v", c)
	}
	if m := (Report{Checks: no}).Missing([]string{Cgroups}); !slices.Equal(m, []string{Cgroups}) {
		t.Errorf("no delegation: Missing = %v", m)
	}
	if c := cloneIntoCheck("", cgroup.Info{Version: 2, Delegation: &cgroup.Delegation{}}, nil); c.OK || !strings.Contains(c.Detail, "not probed") {
		t.Errorf("clone into cgroup without a delegated subtree: %+v", c)
	}

	// As root there is no delegation check.
	for _, c := range cgroupChecks(cgroup.Info{Version: 2, Controllers: at, Sockets: "memory.max"}, nil) {
		if c.Name == "cgroup delegation" {
			t.Errorf("delegation check as root: %+v", c)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/mnt/with\040space\134x`); got != `/mnt/with space\x` {
		t.Errorf("got %q", got)
	}
	if got := unescapeMountinfo(`/sys/fs/cgroup`); got != "/sys/fs/cgroup" {
		t.Errorf("got %q", got)
	}
}
