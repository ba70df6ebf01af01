// Package userns is nsbox's rootless mode: how a command started by an
// ordinary user enters nsbox's own user namespace, and how code tells that
// it runs there.
//
// As root, nsbox works in the host's initial user namespace. Started by
// any other user, the commands that build sandboxes re-execute nsbox in a
// new user and mount namespace it owns (the outer namespace), with the
// caller's uid mapped to 0, or with a range of subordinate ids mapped
// through newuidmap/newgidmap when /etc/subuid grants one. Inside it nsbox
// holds every capability over what that namespace owns, so the
// supervisor's steps (detached mounts, a fresh tmpfs, the init's user
// namespace and its id maps) work unchanged; what the host keeps to real
// root (cgroup v1, a cgroup v2 tree not delegated to the caller, idmapped
// mounts of host filesystems, host ids outside the caller's) it still
// cannot do, and the plan says so.
package userns
