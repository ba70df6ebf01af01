#!/bin/sh
# entrypoint.sh: start nsbox in a Kubernetes pod (deploy/kubernetes/), with
# the cgroup v2 tree nsbox needs for its runs; arguments are nsbox's.
#
# On cgroup v2, nsbox creates its runs' cgroups below the root of the
# hierarchy it sees at /sys/fs/cgroup, and must be able to enable
# controllers there. Two things stand in the way in a pod:
#  - a privileged container shares the node's cgroup namespace (containerd
#    makes one only for containers that are not privileged), so that root
#    is the node's: the runs would escape the pod's limits. This script
#    then re-executes itself in a new cgroup and mount namespace, whose
#    root is the container's own cgroup, and mounts that view of cgroup2 on
#    /sys/fs/cgroup (in its own mount namespace: the node sees no change);
#  - the "no internal processes" rule: no controller can be enabled for
#    children of a cgroup that holds processes, and this process is in the
#    root. It moves itself into a leaf, service/, first (writing 0 to
#    cgroup.procs moves the writer), as Docker-in-Docker does.
# On cgroup v1 nodes it changes nothing (docs/kubernetes.md says what that
# leaves unbounded).
set -eu
nsbox=${NSBOX:-/usr/local/bin/nsbox}
if [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -w /sys/fs/cgroup/cgroup.procs ]; then
	if [ "$(sed -n 's/^0:://p' /proc/self/cgroup)" != / ]; then
		if [ -n "${NSBOX_ENTRYPOINT_INNER:-}" ]; then
			echo "entrypoint: still not at the root of a cgroup namespace after unshare: $(cat /proc/self/cgroup)" >&2
			exit 125
		fi
		NSBOX_ENTRYPOINT_INNER=1 exec unshare --cgroup --mount --propagation private -- "$0" "$@"
	fi
	if [ -n "${NSBOX_ENTRYPOINT_INNER:-}" ]; then
		# The kernel refuses the same filesystem mounted again on its
		# own root at the same place: detach the node's view first.
		umount -l /sys/fs/cgroup
		mount -t cgroup2 cgroup2 /sys/fs/cgroup
	fi
	mkdir -p /sys/fs/cgroup/service
	echo 0 >/sys/fs/cgroup/service/cgroup.procs
fi
unset NSBOX_ENTRYPOINT_INNER
exec "$nsbox" "$@"
