package cgroup

// Tests of rootless mode's delegated subtree over a fake cgroup v2 tree
// (see fakeV2). The kernel's permission checks are what the host's
// writable function stands for here; real_delegate_test.go has them for
// real.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeSelfPid is this "process" in a fake tree: above PID_MAX_LIMIT, like
// impossiblePid, and different from it.
const fakeSelfPid = 4194306

// fakeScope is the delegated scope of the fake trees, relative to the root.
const fakeScope = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"

// fakeDelegated returns a rootless host over a fake v2 tree in which this
// "process" is alone in fakeScope, offered controllers, with writable
// reporting every path writable but those in denied (with their error).
func fakeDelegated(t *testing.T, controllers string, denied map[string]error) *host {
	t.Helper()
	h := fakeV2(t, "cpuset cpu io memory hugetlb pids", fakeOpts{})
	scope := filepath.Join(h.v2root, fakeScope)
	if err := os.MkdirAll(scope, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, scope, map[string]string{
		"cgroup.controllers":     controllers + "\n",
		"cgroup.subtree_control": "",
		"cgroup.procs":           strconv.Itoa(fakeSelfPid) + "\n",
		"cgroup.type":            "domain\n",
	})
	h.rootless, h.self, h.pid = true, fakeScope, fakeSelfPid
	h.writable = func(p string) error {
		if err, ok := denied[p]; ok {
			return &os.PathError{Op: "access", Path: p, Err: err}
		}
		return nil
	}
	return h
}

// TestRootlessDelegatedScope: a scope delegated to the user, holding only
// nsbox, is detected; creating a run moves nsbox into the leaf, enables
// the controllers in the scope and creates the run below it, and nothing
// above the scope is written.
func TestRootlessDelegatedScope(t *testing.T) {
	h := fakeDelegated(t, "cpu io memory pids", nil)
	scope := filepath.Join(h.v2root, fakeScope)
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if d := info.Delegation; d == nil || !d.Usable || d.Path != scope || d.Why != "" {
		t.Fatalf("Delegation = %+v, want usable at %s", d, scope)
	}
	if len(info.Missing) != 0 || info.Hint != "" || info.Version != 2 || info.Sockets != "memory.max" {
		t.Errorf("Info = %+v, want v2 with nothing missing", info)
	}
	for _, ctrl := range neededV2 {
		if info.Controllers[ctrl] != scope {
			t.Errorf("Controllers[%s] = %q, want %s", ctrl, info.Controllers[ctrl], scope)
		}
	}

	c, err := h.create("nsbox", "run1", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(scope, "nsbox", "run1")
	if got := c.Paths()["unified"]; got != run {
		t.Errorf("run cgroup at %s, want %s", got, run)
	}
	for file, want := range map[string]string{
		filepath.Join(run, "memory.max"):                           "67108864",
		filepath.Join(run, "pids.max"):                             "20",
		filepath.Join(scope, LeafName, "cgroup.procs"):             strconv.Itoa(fakeSelfPid),
		filepath.Join(scope, "cgroup.subtree_control"):             "+memory +pids +cpu",
		filepath.Join(scope, "nsbox", "cgroup.subtree_control"):    "+memory +pids +cpu",
		filepath.Join(h.v2root, "cgroup.subtree_control"):          "", // above the scope: untouched
		filepath.Join(h.v2root, "user.slice", "cgroup.procs"):      "<none>",
		filepath.Join(h.v2root, "nsbox", "cgroup.subtree_control"): "<none>",
	} {
		got := "<none>"
		if b, err := os.ReadFile(file); err == nil {
			got = strings.TrimSpace(string(b))
		}
		if got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if want := fakeScope + "/" + LeafName; h.self != want {
		t.Errorf("self = %s after the move, want %s", h.self, want)
	}

	// Another nsbox process, started in the leaf, finds the same subtree,
	// already prepared (the kernel moved this one out of the scope).
	writeFiles(t, scope, map[string]string{"cgroup.procs": ""})
	other := *h
	h2 := &other
	h2.self = fakeScope + "/" + LeafName
	if info, err := h2.info(); err != nil || !info.Delegation.Usable || info.Delegation.Path != scope {
		t.Errorf("from the leaf: %+v, %v; want usable at %s", info.Delegation, err, scope)
	}
	if c2, err := h2.create("nsbox", "run2", testLimits); err != nil {
		t.Errorf("second run from the leaf: %v", err)
	} else if err := c2.Destroy(); err != nil {
		t.Fatal(err)
	}

	// Sweep looks below the scope, and only there.
	if err := os.MkdirAll(filepath.Join(h.v2root, "nsbox", "dead"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := h.sweep("nsbox", func(name string) bool { return name != "run1" })
	if err != nil || !slices.Equal(removed, []string{"run1"}) {
		t.Errorf("sweep: %q, %v; want [run1]", removed, err)
	}
	if _, err := os.Stat(filepath.Join(h.v2root, "nsbox", "dead")); err != nil {
		t.Errorf("sweep went above the scope: %v", err)
	}
}

// TestRootlessNotDelegated: a cgroup the user cannot write (a login
// session's scope, owned by root) is not usable, with systemd-run as the
// fix, and New creates nothing.
func TestRootlessNotDelegated(t *testing.T) {
	for _, file := range []string{"", "cgroup.procs", "cgroup.subtree_control"} {
		h := fakeDelegated(t, "cpu memory pids", nil)
		denied := filepath.Join(h.v2root, fakeScope, file)
		h.writable = func(p string) error {
			if p == denied {
				return &os.PathError{Op: "access", Path: p, Err: unix.EACCES}
			}
			return nil
		}
		info, err := h.info()
		if err != nil {
			t.Fatal(err)
		}
		d := info.Delegation
		if d == nil || d.Usable || !strings.Contains(d.Why, "not delegated") || !strings.Contains(d.Why, denied) {
			t.Errorf("%s denied: Delegation %+v, want unusable, naming it", denied, d)
		}
		if !slices.Equal(info.Missing, neededV2) || len(info.Controllers) != 0 {
			t.Errorf("%s denied: Missing %q, Controllers %v", denied, info.Missing, info.Controllers)
		}
		if !strings.Contains(info.Hint, "systemd-run --user --scope -p Delegate=yes nsbox run") {
			t.Errorf("%s denied: Hint %q lacks the systemd-run fix", denied, info.Hint)
		}
		_, err = h.create("nsbox", "run1", testLimits)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Delegate=yes") {
			t.Errorf("%s denied: create: %v, want ErrUnavailable with the fix", denied, err)
		}
		for _, p := range []string{LeafName, "nsbox"} {
			if _, err := os.Stat(filepath.Join(h.v2root, fakeScope, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s denied: create made %s: %v", denied, p, err)
			}
		}
	}

	// A read-only cgroupfs (a container's) says so.
	h := fakeDelegated(t, "cpu memory pids", nil)
	h.writable = func(p string) error { return &os.PathError{Op: "access", Path: p, Err: unix.EROFS} }
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Delegation.Usable || !strings.Contains(info.Delegation.Why, "read-only") || info.Hint != hintReadOnly {
		t.Errorf("read-only: %+v, hint %q", info.Delegation, info.Hint)
	}
}

// TestRootlessControllersMissing: a scope delegated without cpu (systemd's
// default for user sessions before it delegated cpu) is not usable, and
// the fix is systemd's Delegate= for user@.service.
func TestRootlessControllersMissing(t *testing.T) {
	h := fakeDelegated(t, "io memory pids", nil)
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Delegation.Usable || !strings.Contains(info.Delegation.Why, "controllers cpu are not delegated") {
		t.Errorf("Delegation %+v, want unusable for cpu", info.Delegation)
	}
	if !slices.Equal(info.Missing, []string{"cpu"}) || !strings.Contains(info.Hint, "Delegate=cpu memory pids") {
		t.Errorf("Missing %q, Hint %q; want cpu and user@.service's Delegate=", info.Missing, info.Hint)
	}
	if _, err := h.create("nsbox", "run1", testLimits); !errors.Is(err, ErrUnavailable) {
		t.Errorf("create: %v, want ErrUnavailable", err)
	}
}

// TestRootlessScopeWithOtherProcesses: a delegated cgroup that holds
// other processes (the shell that started nsbox) cannot enable
// controllers for its children: not usable, and nothing is moved.
func TestRootlessScopeWithOtherProcesses(t *testing.T) {
	for _, self := range []string{fakeScope, fakeScope + "/" + LeafName} {
		h := fakeDelegated(t, "cpu memory pids", nil)
		scope := filepath.Join(h.v2root, fakeScope)
		writeFiles(t, scope, map[string]string{"cgroup.procs": strconv.Itoa(fakeSelfPid) + "\n" + impossiblePid + "\n"})
		if self != fakeScope {
			if err := os.Mkdir(filepath.Join(scope, LeafName), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, scope, map[string]string{"cgroup.procs": impossiblePid + "\n"})
		}
		h.self = self
		info, err := h.info()
		if err != nil {
			t.Fatal(err)
		}
		d := info.Delegation
		if d.Usable || d.Path != scope || !strings.Contains(d.Why, impossiblePid) || !strings.Contains(d.Why, "no internal processes") ||
			strings.Contains(d.Why, strconv.Itoa(fakeSelfPid)) {
			t.Errorf("self %s: Delegation %+v, want unusable naming only the other pid", self, d)
		}
		if !strings.Contains(info.Hint, "scope of its own") || !slices.Equal(info.Missing, neededV2) {
			t.Errorf("self %s: Missing %q, Hint %q", self, info.Missing, info.Hint)
		}
		if _, err := h.create("nsbox", "run1", testLimits); !errors.Is(err, ErrUnavailable) {
			t.Errorf("self %s: create: %v, want ErrUnavailable", self, err)
		}
		if got := readFile(t, filepath.Join(scope, "cgroup.subtree_control")); got != "" {
			t.Errorf("self %s: subtree_control = %q, want untouched", self, got)
		}
	}
}

// TestRootlessV1: cgroup v1 cannot be delegated: not possible, with the
// fix, and nothing of root's runs is touched.
func TestRootlessV1(t *testing.T) {
	mnt := t.TempDir()
	dead := filepath.Join(mnt, "nsbox", "s00000000-dead")
	if err := os.MkdirAll(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &host{version: 1, rootless: true, pid: fakeSelfPid, v1: map[string]string{"memory": mnt, "pids": mnt},
		rmdir: os.RemoveAll, killTimeout: defaultKillTimeout,
		writable: func(string) error { return nil }}
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if d := info.Delegation; d == nil || d.Usable || d.Why != whyRootlessV1 {
		t.Errorf("Delegation %+v, want not possible", d)
	}
	if info.Version != 1 || !slices.Equal(info.Missing, neededV1) || len(info.Controllers) != 0 {
		t.Errorf("Info %+v, want v1 with every controller missing", info)
	}
	for _, want := range []string{"run nsbox as root", "cgroup v2", "systemd-run --user --scope -p Delegate=yes"} {
		if !strings.Contains(info.Hint, want) {
			t.Errorf("Hint %q lacks %q", info.Hint, want)
		}
	}
	if _, err := h.create("nsbox", "run1", testLimits); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "cannot be delegated") {
		t.Errorf("create: %v, want ErrUnavailable saying why", err)
	}
	if removed, err := h.sweep("nsbox", func(string) bool { return false }); err != nil || len(removed) != 0 {
		t.Errorf("sweep: %q, %v; want nothing", removed, err)
	}
	if _, err := os.Stat(dead); err != nil {
		t.Errorf("a rootless sweep touched root's v1 cgroups: %v", err)
	}
}
