package hostcheck

import "github.com/nsbox/nsbox/sandbox/cgroup"

// Probe exercises every feature nsbox uses, the way a run uses it, and
// reports each as a Check, in a fixed order: the namespaces, the mount
// API, cgroups and their controllers, seccomp, Landlock, memfd noexec,
// the workspace tmpfs, then the informational proc subset=pid and clone
// into cgroup.
//
// exe is the nsbox binary (os.Executable()), re-executed with
// ChildCommand for the probes that need a child; a test binary whose
// TestMain dispatches ChildCommand to ChildMain works too. With exe empty
// those probes fail with "not probed". Probe takes well under a second on
// a working host; each child is killed after childTimeout at the latest.
func Probe(exe string) Report {
	r := Report{Kernel: kernelRelease(), Checks: []Check{}, Notes: []string{}}
	r.Checks = append(r.Checks, probeNamespaces(exe)...)
	r.Checks = append(r.Checks, probeMountAPI(exe))
	info, err := cgroup.Detect()
	r.Checks = append(r.Checks, cgroupChecks(info, err)...)
	r.Notes = append(r.Notes, info.Warnings...)
	r.Checks = append(r.Checks, seccompCheck(), landlockCheck(), memfdCheck(), probeWorkspaceTmpfs())
	r.Checks = append(r.Checks, probeProcSubset(exe), cloneIntoCheck(exe, info, err))
	return r
}
