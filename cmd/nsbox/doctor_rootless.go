package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/roots"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// envUsernsError carries, from main to doctor, why nsbox's user
// namespace could not be entered: doctor then reports it instead of
// failing, and probes from the caller's own namespace.
const envUsernsError = "NSBOX_USERNS_ERROR"

// modeChecks are doctor's rows about the mode nsbox runs in: as root, the
// host id range and the idmapped workspace; without root, nsbox's user
// namespace, the ids runs get there, where state lives, and what root
// mode has that this mode cannot have (docs/running.md#rootless-mode).
func modeChecks(workspace string) []hostcheck.Check {
	if why := os.Getenv(envUsernsError); why != "" {
		return []hostcheck.Check{{Name: "rootless user namespace", Group: hostcheck.Namespaces, MinKernel: "3.8",
			Detail: why, Hint: userns.Hint}}
	}
	if !userns.Outer() {
		return []hostcheck.Check{idRangeCheck(), idmapCheck(workspace)}
	}
	return []hostcheck.Check{usernsCheck(), runIDsCheck(), stateCheck(), appArmorCheck(),
		{Name: "idmapped workspace", OK: true, MinKernel: "-",
			Detail: "not available rootless (idmapping a host filesystem needs host root): a --workspace must be writable by the program's uid"}}
}

// usernsCheck shows nsbox's user namespace's maps, as the host sees them.
func usernsCheck() hostcheck.Check {
	c := hostcheck.Check{Name: "rootless user namespace", Group: hostcheck.Namespaces, MinKernel: "3.8", OK: true}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		c.OK, c.Detail = false, err.Error()
		return c
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			lines = append(lines, fmt.Sprintf("%s→host %s (%s)", f[0], f[1], plural(f[2], "id")))
		}
	}
	c.Detail = "nsbox's user namespace maps uids " + strings.Join(lines, ", ")
	return c
}

// runIDsCheck says which ids a run gets in nsbox's user namespace.
func runIDsCheck() hostcheck.Check {
	c := hostcheck.Check{Name: "run ids", OK: true, MinKernel: "-"}
	first, count, err := userns.MappedIDs()
	switch {
	case err != nil:
		c.OK, c.Detail = false, err.Error()
	case count < supervisor.IDsPerRun+1:
		c.Detail = "shared: the program runs as your own uid (no subordinate ids mapped; " + os.Getenv(userns.EnvIDs) + ")"
		c.Hint = "for a host uid per run: install uidmap (newuidmap, newgidmap) and grant a range in /etc/subuid and /etc/subgid " +
			"(usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER)"
		if m, err := userns.ChooseMode(); err == nil && m.Why != "" {
			c.Detail = "shared: the program runs as your own uid: " + m.Why
		}
	default:
		r := supervisor.EvenRange(first, count)
		c.Detail = fmt.Sprintf("own per run: a pair of your subordinate ids (namespace ids %d-%d), %d runs at once",
			r.Base, r.Base+r.Count-1, r.Slots())
	}
	return c
}

// stateCheck says where a user's runs, audit log and roots live.
func stateCheck() hostcheck.Check {
	return hostcheck.Check{Name: "state", OK: true, MinKernel: "-",
		Detail: fmt.Sprintf("runs %s, audit log %s, roots %s (without NSBOX_ROOTS_DIR, built-in roots that root built in %s are used read-only)",
			supervisor.StateDir(), audit.Path(""), roots.Dir(), roots.DefaultDir)}
}

// appArmorCheck reports Ubuntu's switch that confines unprivileged user
// namespaces. Inside nsbox's namespace it was already created; the switch
// matters for the capabilities a confined process keeps there, which the
// probes above tried.
func appArmorCheck() hostcheck.Check {
	c := hostcheck.Check{Name: "apparmor userns restriction", OK: true, MinKernel: "-"}
	b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	switch v := strings.TrimSpace(string(b)); {
	case err != nil:
		c.Detail = "not present (no AppArmor restriction on unprivileged user namespaces)"
	case v == "0":
		c.Detail = "kernel.apparmor_restrict_unprivileged_userns is 0"
	default:
		c.Detail = "kernel.apparmor_restrict_unprivileged_userns is " + v + ": nsbox needs the profile deploy/apparmor/nsbox"
		c.Hint = "sudo install -m 644 deploy/apparmor/nsbox /etc/apparmor.d/nsbox && sudo apparmor_parser -r /etc/apparmor.d/nsbox"
	}
	return c
}

// plural is n and noun, with an s unless n is "1".
func plural(n, noun string) string {
	if n == "1" {
		return n + " " + noun
	}
	return n + " " + noun + "s"
}
