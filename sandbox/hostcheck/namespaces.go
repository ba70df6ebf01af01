package hostcheck

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// namespace is one of the namespaces a run creates.
type namespace struct {
	proc      string  // name under /proc/self/ns and in max_<proc>_namespaces
	check     string  // Check.Name
	flag      uintptr // CLONE_NEW*
	config    string  // kernel option that provides it
	minKernel string  // first Linux with the namespace (user: usable unprivileged and as owner of the others)
	what      string  // what the child did in it, for Check.Detail
}

// namespaces in the order doctor lists them; the user namespace first,
// since every other one is created inside one.
var namespaces = []namespace{
	{"user", "user namespace", syscall.CLONE_NEWUSER, "CONFIG_USER_NS", "3.8", "created, ids mapped"},
	{"mnt", "mount namespace", syscall.CLONE_NEWNS, "CONFIG_NAMESPACES", "2.4.19", "created, / made private"},
	{"pid", "pid namespace", syscall.CLONE_NEWPID, "CONFIG_PID_NS", "2.6.24", "created, child is PID 1"},
	{"net", "network namespace", syscall.CLONE_NEWNET, "CONFIG_NET_NS", "2.6.29", "created, loopback up, the proxy's socket listening"},
	{"ipc", "ipc namespace", syscall.CLONE_NEWIPC, "CONFIG_IPC_NS", "2.6.19", "created"},
	{"uts", "uts namespace", syscall.CLONE_NEWUTS, "CONFIG_UTS_NS", "2.6.19", "created, hostname set"},
	{"cgroup", "cgroup namespace", syscall.CLONE_NEWCGROUP, "CONFIG_CGROUPS", "4.6", "created"},
}

// probeNamespaces starts one child per namespace, in that namespace and a
// new user namespace, and has it do the init's first step there. A child
// that starts, succeeds and reports a namespace id different from ours
// proves the namespace works as a run needs it.
func probeNamespaces(exe string) []Check {
	var checks []Check
	userOK := true
	for _, ns := range namespaces {
		c := Check{Name: ns.check, Group: Namespaces, MinKernel: ns.minKernel}
		if !userOK {
			// Every namespace of a run is created inside a new user
			// namespace; without one the others cannot be tried as a run
			// would use them.
			c.Detail = "not probed: needs a user namespace"
			c.Hint = "fix the user namespace first"
			checks = append(checks, c)
			continue
		}
		err := probeNamespace(exe, ns)
		if err != nil {
			c.Detail = err.Error()
			c.Hint = namespaceHint(ns, err)
		} else {
			c.OK, c.Detail = true, ns.what
		}
		if ns.proc == "user" {
			userOK = c.OK
		}
		checks = append(checks, c)
	}
	return checks
}

func probeNamespace(exe string, ns namespace) error {
	own, err := os.Readlink("/proc/self/ns/" + ns.proc)
	if err != nil {
		return fmt.Errorf("kernel has no %s namespace (%w)", ns.proc, err)
	}
	got, err := child{exe: exe, args: []string{"ns", ns.proc}, flags: syscall.CLONE_NEWUSER | ns.flag}.run()
	if err != nil {
		return err
	}
	if got == own {
		return fmt.Errorf("probe child is still in this process's %s namespace %s", ns.proc, own)
	}
	return nil
}

// namespaceHint says how to get namespace ns, given how creating it
// failed. The user namespace is where hosts differ; the others fail only
// when the kernel lacks them or a container runtime blocks them.
func namespaceHint(ns namespace, err error) string {
	limit := fmt.Sprintf("/proc/sys/user/max_%s_namespaces", ns.proc)
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Sprintf("the limit in %s is reached or 0: raise it, e.g. `sysctl -w user.max_%s_namespaces=15000` (persist in /etc/sysctl.d/)",
			limit, ns.proc)
	case errors.Is(err, syscall.EINVAL) && ns.proc != "user":
		return fmt.Sprintf("the kernel lacks the %s namespace: rebuild with %s=y", ns.proc, ns.config)
	}
	if ns.proc == "user" {
		return userNamespaceHint
	}
	return containerHint
}

// userNamespaceHint covers what blocks user namespaces in practice.
const userNamespaceHint = "user namespaces are disabled or blocked: " +
	"check `sysctl user.max_user_namespaces` (must be > 0); " +
	"on Ubuntu 23.10+/24.04 `kernel.apparmor_restrict_unprivileged_userns=1` blocks them for processes without CAP_SYS_ADMIN: " +
	"run nsbox as root, " + appArmorProfileFix + ", or set the sysctl to 0; " +
	"older Debian kernels need `kernel.unprivileged_userns_clone=1`; the kernel needs CONFIG_USER_NS=y; " +
	"in Docker/Kubernetes " + containerAdvice

// appArmorHint is the fix when AppArmor's switch is what blocks them.
const appArmorHint = "run nsbox as root, " + appArmorProfileFix + ", or set `sysctl kernel.apparmor_restrict_unprivileged_userns=0`"

// appArmorProfileFix installs the AppArmor profile shipped with nsbox
// (appArmorProfile, relative to the source tree), which lets nsbox's
// binaries create user namespaces; a test checks that the file exists and
// attaches to them.
const appArmorProfileFix = "install the AppArmor profile nsbox ships in " + appArmorProfile +
	" (from nsbox's source tree; it covers /usr/bin, /usr/local/bin and /opt/nsbox/bin, edit it for another directory): " +
	"`sudo install -m 644 " + appArmorProfile + " /etc/apparmor.d/nsbox && sudo apparmor_parser -r /etc/apparmor.d/nsbox`"

// appArmorProfile is where nsbox's source tree keeps its AppArmor profile.
const appArmorProfile = "deploy/apparmor/nsbox"

// containerHint is for features a container runtime typically blocks.
const containerHint = "creating it was refused: in Docker/Kubernetes " + containerAdvice

const containerAdvice = "the default seccomp and AppArmor profiles block unshare/clone with namespace flags and mount: " +
	"run with --privileged, or with a seccomp and AppArmor profile that allows them (e.g. --security-opt seccomp=unconfined " +
	"--security-opt apparmor=unconfined --cap-add SYS_ADMIN)"
