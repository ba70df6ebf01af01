package hostcheck

import (
	"fmt"
	"slices"

	"github.com/nsbox/nsbox/sandbox/cgroup"
)

// cgroupControllers are the controllers a run needs, per version, in the
// order doctor lists them, with the kernel that made each usable for nsbox
// (v1 cpu: CFS bandwidth control, cpu.cfs_quota_us).
var cgroupControllers = map[int][]controller{
	1: {{"memory", "2.6.25"}, {"pids", "4.3"}, {"cpu", "3.2"}, {"freezer", "2.6.28"}},
	2: {{"memory", "4.5"}, {"pids", "4.5"}, {"cpu", "4.15"}},
}

type controller struct{ name, minKernel string }

// cgroupChecks turns what cgroup.Detect found into the "cgroups" check
// and one check per needed controller.
func cgroupChecks(info cgroup.Info, err error) []Check {
	c := Check{Name: "cgroups", Group: Cgroups, MinKernel: "2.6.24"}
	if info.Version == 2 {
		c.MinKernel = "4.5"
	}
	if err != nil {
		c.Detail, c.Hint = err.Error(), cgroupHint(info)
		return []Check{c}
	}
	c.OK, c.Detail = true, hierarchyDetail(info.Version)
	checks := []Check{c}
	if info.Delegation != nil {
		checks = append(checks, delegationCheck(info))
	}

	// Detect's Controllers also holds controllers a run uses but does not
	// need (cpuacct on v1); only the needed ones get a check: those of
	// the table, and any missing one the table does not know.
	for _, ctl := range cgroupControllers[info.Version] {
		checks = append(checks, controllerCheck(info, ctl.name, ctl.minKernel))
	}
	for _, name := range info.Missing {
		known := name == cgroup.SocketMemory || slices.ContainsFunc(cgroupControllers[info.Version], func(ctl controller) bool {
			return ctl.name == name
		})
		if !known {
			checks = append(checks, controllerCheck(info, name, ""))
		}
	}
	return append(checks, socketMemoryCheck(info))
}

// socketMemoryCheck says whether the run's socket buffers count against its
// memory limit: on v1 through memory.kmem.tcp.limit_in_bytes (Linux 3.3),
// which nsbox sets; on v2 they are charged to memory.max (Linux 4.5)
// unless the kernel was booted with cgroup.memory=nosocket.
func socketMemoryCheck(info cgroup.Info) Check {
	c := Check{Name: "cgroup socket memory", Group: Cgroups, MinKernel: "3.3"}
	if info.Version == 2 {
		c.MinKernel = "4.5"
	}
	if info.Sockets != "" && !slices.Contains(info.Missing, cgroup.SocketMemory) {
		c.OK, c.Detail = true, "socket buffers count against the memory limit ("+info.Sockets+")"
	} else {
		c.Detail, c.Hint = "socket buffers would not count against the memory limit", cgroupHint(info)
	}
	return c
}

// delegationCheck reports, in rootless mode, the cgroup v2 subtree
// delegated to the user that runs are created below (cgroup.Delegation).
func delegationCheck(info cgroup.Info) Check {
	d := info.Delegation
	c := Check{Name: "cgroup delegation", Group: Cgroups, MinKernel: "4.5"}
	if d.Usable {
		c.OK = true
		c.Detail = fmt.Sprintf("rootless: runs go below %s, delegated to this user (nsbox's own processes in %s/%s)",
			d.Path, d.Path, cgroup.LeafName)
	} else {
		c.Detail, c.Hint = "rootless: "+d.Why, cgroupHint(info)
	}
	return c
}

func controllerCheck(info cgroup.Info, name, minKernel string) Check {
	c := Check{Name: "cgroup controller " + name, Group: Cgroups, MinKernel: minKernel}
	if where, ok := info.Controllers[name]; ok && !slices.Contains(info.Missing, name) {
		c.OK, c.Detail = true, where
	} else {
		c.Detail, c.Hint = "not usable", cgroupHint(info)
	}
	return c
}

// hierarchyDetail names the cgroup layout: "v2 (unified)", "v1 (hybrid)"
// when a cgroup2 tree is mounted beside the v1 controllers (it carries no
// controllers nsbox uses), or "v1 (legacy)".
func hierarchyDetail(version int) string {
	if version == 2 {
		return "v2 (unified)"
	}
	if _, err := findCgroup2(); err == nil {
		return "v1 (hybrid)"
	}
	return "v1 (legacy)"
}

// cgroupHint prefers the cgroup package's own advice, which knows where
// nsbox puts its cgroups.
func cgroupHint(info cgroup.Info) string {
	if info.Hint != "" {
		return info.Hint
	}
	if info.Version == 1 {
		return "mount the v1 hierarchy of each missing controller under /sys/fs/cgroup (some kernels also need the boot " +
			"parameter cgroup_enable=memory); in Docker/Kubernetes run with --privileged so the cgroup tree is writable"
	}
	return cgroupV2Hint
}

const cgroupV2Hint = "nsbox needs a writable cgroup v2 subtree with memory, pids and cpu enabled: as a systemd service set " +
	"Delegate=yes (or run under `systemd-run -p Delegate=yes`); in Docker/Kubernetes run with --privileged or " +
	"--cgroupns=private and a writable, delegated cgroup"
