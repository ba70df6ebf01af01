#!/bin/sh
# entrypoint-check.sh: run deploy/container/entrypoint.sh as it runs in a
# privileged pod on a cgroup v2 node, and check where it starts nsbox.
#
# In a private mount namespace, cgroup2 is mounted on /sys/fs/cgroup and
# this process moves into a cgroup of its own, as the node's view and the
# pod's cgroup look to a privileged container (which shares the node's
# cgroup namespace). The entrypoint then starts a stand-in for nsbox that
# reports its arguments and cgroup: it must run in service/ of a cgroup
# namespace whose root is the pod's cgroup, with /sys/fs/cgroup showing that
# root. As root; run by `make k8s-validate`. Removes the cgroup it made.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
entry="$here/../container/entrypoint.sh"
tmp=$(mktemp -d)
pod="nsbox-entrypoint-check-$$"
cleanup() {
	rm -rf "$tmp"
	# The cgroups, once the processes in them have exited; seen through a
	# mount of our own, since the host may have no cgroup2 mount.
	mkdir -p "$tmp.cg" && mount -t cgroup2 cgroup2 "$tmp.cg" 2>/dev/null &&
		{ rmdir "$tmp.cg/$pod/service" "$tmp.cg/$pod" 2>/dev/null || true; umount "$tmp.cg"; }
	rmdir "$tmp.cg" 2>/dev/null || true
}
trap cleanup EXIT

cat >"$tmp/nsbox" <<'STANDIN'
#!/bin/sh
echo "args=$*"
echo "cgroup=$(sed -n 's/^0:://p' /proc/self/cgroup)"
test -d /sys/fs/cgroup/service && echo "service=yes"
test -d "/sys/fs/cgroup/$POD" && echo "nodeview=yes"
exit 0
STANDIN
chmod +x "$tmp/nsbox"

out=$(POD="$pod" NSBOX="$tmp/nsbox" unshare --mount --propagation private -- sh -eu -c '
	mount -t cgroup2 cgroup2 /sys/fs/cgroup
	mkdir "/sys/fs/cgroup/$POD"
	echo 0 >"/sys/fs/cgroup/$POD/cgroup.procs"
	exec "$0" serve --listen=tcp:0.0.0.0:8700
' "$entry" 2>&1) || { echo "entrypoint-check: FAIL: the entrypoint failed: $out" >&2; exit 1; }

want="args=serve --listen=tcp:0.0.0.0:8700
cgroup=/service
service=yes"
if [ "$out" != "$want" ]; then
	echo "entrypoint-check: FAIL: the stand-in for nsbox reported" >&2
	echo "$out" >&2
	echo "want" >&2
	echo "$want" >&2
	exit 1
fi
echo "entrypoint-check: ok: nsbox starts in service/ of a cgroup namespace rooted at the pod's cgroup"
