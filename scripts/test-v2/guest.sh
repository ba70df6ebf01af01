#!/usr/bin/env bash
# Runs inside the cgroup v2 guest that scripts/test-v2/run.sh boots, as
# root: checks that cgroup v2 is the only hierarchy, gives the tests a
# writable tmpfs (the host's filesystem is shared read-only), and runs the
# compiled test binaries with NSBOX_MUST_WORK=1. Its last line is the
# verdict the host reads: "nsbox-v2-guest: verdict N", 0 when all passed.
#
# Usage: guest.sh REPO BINDIR ACCEL RUN_PATTERN (roots shared at /mnt, a
# scratch disk from the host)
set -uo pipefail
repo=$1 bindir=$2 accel=$3 pattern=$4
verdict=1
trap 'echo "nsbox-v2-guest: verdict $verdict"; exit $verdict' EXIT
say() { printf 'nsbox-v2-guest: %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }

# cgroup v2 only: this process in the unified root, no v1 hierarchy
# mounted, and the controllers nsbox limits with available.
[ "$(cat /proc/self/cgroup)" = "0::/" ] || fail "/proc/self/cgroup is not 0::/: $(cat /proc/self/cgroup)"
[ -e /sys/fs/cgroup/cgroup.controllers ] || fail "no cgroup2 at /sys/fs/cgroup"
if awk '$3 == "cgroup" { found = 1 } END { exit !found }' /proc/mounts; then
	fail "a cgroup v1 hierarchy is mounted: $(awk '$3 == "cgroup"' /proc/mounts)"
fi
for c in cpu memory pids; do
	grep -qw "$c" /sys/fs/cgroup/cgroup.controllers || fail "controller $c missing: $(cat /sys/fs/cgroup/cgroup.controllers)"
done
say "kernel $(uname -r), $(nproc) CPUs, cgroup v2 only: $(cat /sys/fs/cgroup/cgroup.controllers)"

# Writable places: the host's fresh ext4 disk on /tmp for the tests' temp
# dirs, state dirs, audit logs and workspaces (ext4 can be idmapped; /tmp
# is otherwise an overlay on the shared filesystem).
# It is the guest's only block device (the root is shared over 9p).
disk=/dev/vda
[ -b "$disk" ] || fail "no scratch disk at $disk"
# A repository under /tmp (a CI's clone, say) would be hidden by that
# mount: it is seen through a bind mount of the shared /tmp instead.
case $repo/ in
/tmp/*)
	mkdir -p /run/nsbox-host-tmp && mount --bind /tmp /run/nsbox-host-tmp ||
		fail "bind the shared /tmp, where the repository $repo lies, to /run/nsbox-host-tmp"
	repo=/run/nsbox-host-tmp/${repo#/tmp/}
	bindir=/run/nsbox-host-tmp/${bindir#/tmp/}
	;;
esac
mount -t ext4 "$disk" /tmp || fail "mount the scratch disk $disk on /tmp"
chmod 1777 /tmp || fail "chmod /tmp"
[ -e /mnt/base ] && [ -e /mnt/datasci ] || fail "the roots (base, datasci) are not shared at /mnt"
export NSBOX_MUST_WORK=1 NSBOX_BIN=$repo/bin/nsbox NSBOX_ROOTS_DIR=/mnt \
	NSBOX_STATE_DIR=/tmp/nsbox-state TMPDIR=/tmp
# Under software emulation the interpreter alone takes seconds: the tests
# scale the policies' wall clocks and their waits (tests/harness_test.go).
if [ "$accel" = tcg ]; then
	export NSBOX_TEST_TIMEOUT_SCALE=${NSBOX_TEST_TIMEOUT_SCALE:-8}
fi
# doctor's report on this host, from a directory a workspace could be in.
mkdir -p /tmp/doctor && cd /tmp/doctor || fail "mkdir /tmp/doctor"
"$NSBOX_BIN" doctor --policy strict || fail "nsbox doctor --policy strict"

status=0
# one BINARY DIR ARGS...: a test binary in its package's directory (the
# tests read files relative to it).
one() {
	local bin=$1 dir=$2 start=$SECONDS rc
	shift 2
	say "== ${dir#"$repo"/} $*"
	(cd "$dir" && "$bindir/$bin" -test.count=1 -test.timeout=30m "$@")
	rc=$?
	say "== ${dir#"$repo"/}: exit $rc in $((SECONDS - start)) s"
	[ $rc -eq 0 ] || status=1
}
one sandbox_cgroup.test "$repo/sandbox/cgroup" -test.v
one sandbox_hostcheck.test "$repo/sandbox/hostcheck" -test.v
one sandbox_supervisor.test "$repo/sandbox/supervisor" -test.v
# doctor's tests use no file of their package; run where its idmapped
# workspace check can pass (not the shared filesystem).
one cmd_nsbox.test /tmp/doctor -test.v -test.run '^TestDoctor'
one tests.test "$repo/tests" -test.v -test.run "$pattern"

# Cleanup after every run of every test: no cgroup left under nsbox.
left=$(find /sys/fs/cgroup/nsbox -mindepth 1 -type d 2>/dev/null)
if [ -n "$left" ]; then
	say "FAIL: cgroups left under /sys/fs/cgroup/nsbox after the tests:"
	echo "$left"
	status=1
else
	say "no cgroup left under /sys/fs/cgroup/nsbox"
fi
verdict=$status
