package hostcheck

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/cgroup"
)

// Require reports whether this host can enforce reqs, cheaply enough to
// run before every `nsbox run`: it starts no process and changes nothing.
// It returns nil, an error naming unknown requirements, or an
// *UnmetError listing every requirement the host lacks with what was
// found and how to fix it.
//
// The namespace check is a prediction, not a proof: it finds a kernel
// without a namespace, a namespace limit of 0, the AppArmor and Debian
// switches that block user namespaces, and a kernel or seccomp profile
// without the mount API. Only Probe (`nsbox doctor`) tries them.
func Require(reqs []string) error {
	if err := ValidateRequirements(reqs); err != nil {
		return err
	}
	e := &UnmetError{}
	for _, req := range reqs {
		if slices.Contains(e.Missing, req) {
			continue
		}
		var failed []Check
		for _, c := range requireChecks(req) {
			if !c.OK {
				failed = append(failed, c)
			}
		}
		if len(failed) > 0 {
			e.Missing = append(e.Missing, req)
			e.Checks = append(e.Checks, failed...)
		}
	}
	if len(e.Missing) > 0 {
		return e
	}
	return nil
}

// requireChecks are Require's cheap checks of one known requirement.
func requireChecks(req string) []Check {
	switch req {
	case Namespaces:
		return cheapNamespaceChecks()
	case Cgroups:
		return cgroupChecks(cgroup.Detect())
	case Seccomp:
		return []Check{seccompCheck()}
	case Landlock:
		return []Check{landlockCheck()}
	case MemfdNoexec:
		return []Check{memfdCheck()}
	case BoundedWorkspace:
		return []Check{workspaceTmpfsPresent()}
	}
	return []Check{{Name: req, Group: req, Detail: "bug: no check for this requirement"}}
}

// UnmetError is Require's answer when the host lacks a requirement.
type UnmetError struct {
	Missing []string // requirements the host cannot enforce, in the order asked
	Checks  []Check  // the failed checks behind them
}

// Error says what is missing, what was found, and how to fix it, on one
// line, ending with a pointer to `nsbox doctor`.
func (e *UnmetError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "this host cannot enforce the required %s: ", strings.Join(e.Missing, ", "))
	var hints []string
	for i, c := range e.Checks {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", c.Name, c.Detail)
		if c.Hint != "" && !slices.Contains(hints, c.Hint) {
			hints = append(hints, c.Hint)
		}
	}
	if len(hints) > 0 {
		fmt.Fprintf(&b, ". To fix: %s", strings.Join(hints, "; "))
	}
	b.WriteString(". Run `nsbox doctor` for details")
	return b.String()
}

// cheapNamespaceChecks finds what would stop a run's namespaces without
// creating any: one check per namespace, and the mount API.
func cheapNamespaceChecks() []Check {
	privileged := hasCapSysAdmin()
	var checks []Check
	for _, ns := range namespaces {
		c := Check{Name: ns.check, Group: Namespaces, MinKernel: ns.minKernel, OK: true, Detail: "present"}
		limit := fmt.Sprintf("/proc/sys/user/max_%s_namespaces", ns.proc)
		switch {
		case !exists("/proc/self/ns/" + ns.proc):
			c.OK, c.Detail = false, fmt.Sprintf("kernel has no %s namespace (no /proc/self/ns/%s)", ns.proc, ns.proc)
			c.Hint = fmt.Sprintf("rebuild the kernel with %s=y", ns.config)
		case readSysctl(limit) == "0":
			c.OK, c.Detail = false, limit+" is 0"
			c.Hint = fmt.Sprintf("raise it, e.g. `sysctl -w user.max_%s_namespaces=15000` (persist in /etc/sysctl.d/)", ns.proc)
		case ns.proc == "user" && !privileged && readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
			c.OK, c.Detail = false, "kernel.apparmor_restrict_unprivileged_userns is 1 and this process lacks CAP_SYS_ADMIN"
			c.Hint = appArmorHint
		case ns.proc == "user" && !privileged && readSysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
			c.OK, c.Detail = false, "kernel.unprivileged_userns_clone is 0 and this process lacks CAP_SYS_ADMIN"
			c.Hint = userNamespaceHint
		}
		checks = append(checks, c)
	}
	c := Check{Name: mountAPIName, Group: Namespaces, MinKernel: mountAPIMinKernel, OK: true, Detail: "present"}
	if err := mountAPIPresent(); err != nil {
		c.OK, c.Detail, c.Hint = false, err.Error(), mountAPIHint(err)
	}
	return append(checks, c)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// readSysctl returns the trimmed content of a /proc/sys file, or "" when
// it cannot be read (the switch does not exist on this kernel).
func readSysctl(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// hasCapSysAdmin reports whether this process has CAP_SYS_ADMIN in its
// effective set, which exempts it from the unprivileged-userns switches.
func hasCapSysAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_ADMIN) != 0
		}
	}
	return false
}
