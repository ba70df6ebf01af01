package hostcheck

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
)

// TestMain lets this test binary be the probe child: Probe re-executes
// it with ChildCommand, as it re-executes nsbox.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildCommand {
		os.Exit(ChildMain(os.Args[2:]))
	}
	// Race-enabled children sleep a second at exit unless told not to.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	return exe
}

// TestProbeHost probes this host for real. The test machines are kernel
// 6.x with cgroup v1 (hybrid): everything but clone into cgroup (not
// applicable on v1) must really work.
func TestProbeHost(t *testing.T) {
	mustwork.NeedRoot(t)
	r := Probe(testExe(t))
	for _, c := range r.Checks {
		t.Logf("%-50s ok=%-5v %-8s %s", c.Name, c.OK, c.MinKernel, c.Detail)
	}
	byName := map[string]Check{}
	for _, c := range r.Checks {
		if _, dup := byName[c.Name]; dup {
			t.Errorf("check %q reported twice", c.Name)
		}
		byName[c.Name] = c
	}
	mustOK := []string{
		"user namespace", "mount namespace", "pid namespace", "network namespace", "ipc namespace",
		"uts namespace", "cgroup namespace", mountAPIName, "cgroups", "seccomp", "landlock",
		"memfd noexec", procSubsetName, cloneIntoName, workspaceTmpfsName,
	}
	for _, name := range mustOK {
		c, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("no check %q", name)
		case !c.OK:
			t.Errorf("%s: not OK: %s (hint: %s)", name, c.Detail, c.Hint)
		case c.Hint != "":
			t.Errorf("%s: OK but has a hint %q", name, c.Hint)
		case c.MinKernel == "":
			t.Errorf("%s: no minimum kernel", name)
		}
	}
	// The test machines are v1 hybrid; make test-v2's guest is v2 only,
	// where the freezer is part of the core (cgroup.freeze), no controller.
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	v2 := err == nil
	version, controllers := "v1", []string{"memory", "pids", "cpu", "freezer"}
	if v2 {
		version, controllers = "v2", []string{"memory", "pids", "cpu"}
	}
	if d := byName["cgroups"].Detail; !strings.HasPrefix(d, version) {
		t.Errorf("cgroups: detail %q, want %s on this host", d, version)
	}
	for _, ctl := range controllers {
		if c := byName["cgroup controller "+ctl]; !c.OK {
			t.Errorf("cgroup controller %s: %+v", ctl, c)
		}
	}
	if d := byName["landlock"].Detail; !strings.HasPrefix(d, "ABI ") || d == "ABI 0" {
		t.Errorf("landlock: detail %q, want ABI >= 1 on kernel 6.x", d)
	}
	if d := byName[cloneIntoName].Detail; !v2 && !strings.Contains(d, "not applicable") {
		t.Errorf("clone into cgroup on v1: detail %q, want not applicable", d)
	}
	if m := r.Missing(Requirements()); m != nil {
		t.Errorf("Missing(%v) = %v, want none", Requirements(), m)
	}
	if r.Kernel == "" || strings.HasPrefix(r.Kernel, "unknown") {
		t.Errorf("kernel %q", r.Kernel)
	}
}

// TestCloneIntoCgroupV2 runs the v2 probe on the cgroup2 tree of a
// hybrid host (controllerless, but CLONE_INTO_CGROUP works on it) below a
// cgroup of its own, as rootless mode probes below its delegated subtree,
// and checks that the temporary cgroup is gone after.
func TestCloneIntoCgroupV2(t *testing.T) {
	mustwork.NeedRoot(t)
	mnt, err := findCgroup2()
	if err != nil {
		mustwork.Skip(t, "no cgroup2 mount: %v", err)
	}
	parent, err := os.MkdirTemp(mnt.dir, "nsbox-hostcheck-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeCgroup(parent)
	if err := cloneIntoRoundTrip(testExe(t), mnt, parent); err != nil {
		t.Fatalf("clone into a cgroup under %s: %v", parent, err)
	}
	left, err := filepath.Glob(filepath.Join(parent, "nsbox-doctor-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("left behind: %v (%v)", left, err)
	}
}

func TestRequireHost(t *testing.T) {
	mustwork.NeedRoot(t)
	if err := Require(Requirements()); err != nil {
		t.Fatalf("Require(%v): %v", Requirements(), err)
	}
	if err := Require(nil); err != nil {
		t.Fatalf("Require(nil): %v", err)
	}
}

func TestRequireUnknown(t *testing.T) {
	err := Require([]string{"namespaces", "bogus", "selinux"})
	if err == nil {
		t.Fatal("Require accepted unknown requirements")
	}
	var ue *UnmetError
	if errors.As(err, &ue) {
		t.Errorf("unknown names reported as unmet: %v", err)
	}
	for _, want := range []string{`"bogus"`, `"selinux"`, "namespaces, cgroups, seccomp, landlock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestProbeWithoutExe: without a binary to re-execute, the child probes
// fail closed instead of passing.
func TestProbeWithoutExe(t *testing.T) {
	checks := probeNamespaces("")
	if len(checks) != len(namespaces) {
		t.Fatalf("%d checks, want %d", len(checks), len(namespaces))
	}
	for _, c := range checks {
		if c.OK || !strings.Contains(c.Detail, "not probed") {
			t.Errorf("%s: ok=%v detail %q, want not probed", c.Name, c.OK, c.Detail)
		}
	}
	if c := probeMountAPI(""); c.OK {
		t.Errorf("mount API probed without a binary: %+v", c)
	}
}

// TestChildErrno: an errno behind a child's failure reaches the parent.
func TestChildErrno(t *testing.T) {
	mustwork.NeedRoot(t)
	_, err := child{exe: testExe(t), args: []string{"proc-subset", "/nonexistent-nsbox-doctor"},
		flags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID}.run()
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("err = %v, want ENOENT", err)
	}
	_, err = child{exe: testExe(t), args: []string{"no-such-probe"}}.run()
	var ce *childError
	if !errors.As(err, &ce) || ce.errno != 0 || !strings.Contains(err.Error(), "unknown probe") {
		t.Errorf("err = %#v, want a childError without errno", err)
	}
}

// TestChildRefusesHostNamespaces: run without a new user namespace (as
// by hand on the host), the child changes nothing. The UTS namespace is
// new anyway, so a broken guard could not rename the host.
func TestChildRefusesHostNamespaces(t *testing.T) {
	mustwork.NeedRoot(t)
	for _, args := range [][]string{{"ns", "uts"}, {"ns", "mnt"}, {"proc-subset", os.TempDir()}} {
		_, err := child{exe: testExe(t), args: args, flags: syscall.CLONE_NEWUTS | syscall.CLONE_NEWNS}.run()
		if err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%v in the host's user namespace: err = %v, want a refusal", args, err)
		}
	}
}

func TestMountAPIPresent(t *testing.T) {
	mustwork.NeedRoot(t)
	if err := mountAPIPresent(); err != nil {
		t.Fatal(err)
	}
}

// TestProbeWorkspaceTmpfs: the doctor's and Require's checks of
// bounded_workspace pass as root, and the kernel reports the bounds a
// tmpfs was made with, whatever they are (the probe would catch a kernel
// that ignored them).
func TestProbeWorkspaceTmpfs(t *testing.T) {
	mustwork.NeedRoot(t)
	if c := probeWorkspaceTmpfs(); !c.OK || c.Group != BoundedWorkspace {
		t.Errorf("probe: %+v", c)
	}
	if c := workspaceTmpfsPresent(); !c.OK || c.Group != BoundedWorkspace {
		t.Errorf("cheap check: %+v", c)
	}
	for _, b := range [][2]int64{{4 << 20, 100}, {64 << 20, 4096}} {
		if err := boundedTmpfsRoundTrip(b[0], b[1]); err != nil {
			t.Errorf("tmpfs of %d bytes, %d inodes: %v", b[0], b[1], err)
		}
	}
}

func TestCheckOrderAndNames(t *testing.T) {
	var names []string
	for _, ns := range namespaces {
		names = append(names, ns.check)
	}
	want := []string{"user namespace", "mount namespace", "pid namespace", "network namespace", "ipc namespace",
		"uts namespace", "cgroup namespace"}
	if !slices.Equal(names, want) {
		t.Errorf("namespaces %v, want %v", names, want)
	}
}
