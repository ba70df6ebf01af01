#!/usr/bin/env bash
# make test-v2: the tests that depend on cgroups and on the kernel, run as
# root in a guest whose only cgroup hierarchy is v2 (this machine's is v1
# hybrid). The guest is Debian's kernel (linux-image-amd64) booted by
# virtme-ng under QEMU with the host's filesystem shared read-only; the
# test binaries are compiled here, the roots are built here and shared
# read-only, and scripts/test-v2/guest.sh runs the tests inside. The exit
# status is the tests' verdict: a guest that does not boot, is not v2
# only, or does not report a verdict fails.
#
# Environment: ROOTS (the roots directory, required), GO, TAGS (as make
# test's), NSBOX_V2_ACCEL (auto, kvm or tcg; auto uses KVM only when a
# short probe boot with it finishes), NSBOX_V2_RUN (a -run pattern for
# ./tests instead of the selection below), NSBOX_V2_TIMEOUT (the whole
# guest's bound, default 40m).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

: "${ROOTS:?ROOTS (the roots directory) must be set}"
GO=${GO:-go}
TAGS=${TAGS:?TAGS (the build tags of make test) must be set}
work=.test-v2
venv=$work/venv
log() { printf 'test-v2: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s; }

# The selection of ./tests run in the guest, one group a line, each with
# why it is in. Out, and why: tests of the Python layer, the filesystem,
# seccomp, the network, input, the audit log, the service and sessions
# depend on neither the cgroup version nor the kernel's cgroup code and
# run in make test. TestStress (even its short form: some 70 runs and the
# faults) and TestNoCgroupLeftAfterManyRuns (100 runs) take too long
# under emulation, and TestStress's bounds (a kill within a second of its
# deadline, a closed reader noticed within 10 s) are set for a host's
# speed; their cleanup checks are made here by the cleanup group and by
# guest.sh, which fails when anything is left under the nsbox cgroup
# after all the tests. TestTimeoutKillUnderContention and
# TestSupervisorMemoryBounded measure time and memory against bounds set
# for a host, not for an emulator.
selection=(
	# cgroup limits: pids, memory (memory_limit, oom.group), CPU quota.
	'TestForkBombStopsAtPidsMax|TestMemoryBombIsMemoryLimit|TestCPUQuota'
	# rlimits beside the cgroup, and the cgroup's absence failing closed.
	'TestCPUTimeLimit|TestRlimitsInside|TestFailClosedWithoutCgroups'
	# clone into the run's cgroup: every task of a run in it.
	'TestProgramInRunCgroup'
	# cleanup: SIGKILL of the supervisor, stale cgroups swept, nothing left.
	'TestCrashedSupervisorCgroupSwept|TestSweepSparesOtherStateDirs|TestSandboxDiesWithSupervisor'
	'TestTimeoutKillsEveryProcess|TestNormalExitKillsLeftovers|TestStopByHand'
	# the reaper, PID 1 of the run, which on v2 lives in the run's cgroup.
	'TestOrphansAreReaped|TestReaperOutOfReach|TestProgramEndsByItsOwnSignal'
	# a pooled run's early end: the kernel's order of exit (PF_EXITING, the
	# exit code set before the memory is freed), read in /proc.
	'TestPooledRunEnds'
	# host leaks: per-run host uids, per-user counts, the workspace's
	# memory charged to the run's cgroup, socket memory within the limit.
	'TestUnprivilegedIdentity|TestProgramUIDFromHost|TestPerUserCountsStayInTheRun|TestConcurrentRunsOwnUIDs'
	'TestUserQuotasInside|TestLockedSecurebitsRefused|TestCrashedSupervisorSlotNotReused'
	'TestWorkspaceBounded|TestWorkspaceGoesWithKilledSupervisor|TestSocketMemoryBounded'
	# network allowlist mode: the proxy's socket in the run's namespace, its
	# TCP-only filter, every way around it refused.
	'TestNetAllowRefused'
	# rootless mode as a real user in a cgroup delegated to it: limits
	# enforced below it, the service, the killed supervisor. The attack
	# corpus runs rootless in make test (TestRootlessCorpus): seven more
	# minutes here under emulation.
	'TestRootlessRun|TestRootlessCgroupLimits|TestRootlessKilledSupervisor|TestRootlessServe|TestRootlessDoctor'
)
if [ -n "${NSBOX_V2_RUN:-}" ]; then
	run_pattern=$NSBOX_V2_RUN
else
	run_pattern="^($(IFS='|'; echo "${selection[*]}"))\$"
fi

t0=$(now)

# The rootless tests' account (tests/rootless_test.go makes it the same
# way on a host; the guest sees this host's /etc read-only).
if ! id nsbox-rootless >/dev/null 2>&1; then
	useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin nsbox-rootless || die "useradd nsbox-rootless"
fi
for f in /etc/subuid /etc/subgid; do
	grep -q '^nsbox-rootless:' "$f" 2>/dev/null || echo 'nsbox-rootless:1900000000:65536' >>"$f"
done

# 1. Debian packages: QEMU, a kernel, the static busybox virtme-ng
# builds its initramfs with, and mkfs.ext4. The kernel package's hooks only write
# /boot/initrd.img-*; no bootloader is configured in a container.
need=()
for pkg in qemu-system-x86 linux-image-amd64 busybox-static e2fsprogs; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		die "missing Debian packages: ${need[*]} (as root: apt-get install ${need[*]})"
	fi
	log "apt-get install ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
kernel=$(ls -v /boot/vmlinuz-* 2>/dev/null | tail -n 1)
[ -r "$kernel" ] || die "no readable kernel in /boot (linux-image-amd64)"
t_apt=$(now)

# 2. virtme-ng, pinned and hash-checked, in a venv under the repo (of
# Debian's Python, which make deps installs, with python3's pip as the
# datasci venv is); redone when the requirements change.
req=scripts/test-v2/requirements.txt
if ! cmp -s "$req" "$venv/.requirements" 2>/dev/null; then
	log "virtme-ng into $venv"
	rm -rf "$venv"
	/usr/bin/python3.11 -m venv --without-pip "$venv"
	python3 -m pip --python "$venv/bin/python" install --disable-pip-version-check --quiet \
		--require-hashes --only-binary=:all: --no-deps -r "$req"
	cp "$req" "$venv/.requirements"
fi
export PATH=$repo/$venv/bin:$PATH
t_venv=$(now)

# 3. The test binaries, compiled here with make test's tags (without
# -race, whose slow-down the emulator would multiply), and the base root
# (datasci is built by make's datasci target).
mkdir -p "$work/bin"
for pkg in tests sandbox/cgroup sandbox/hostcheck sandbox/supervisor cmd/nsbox; do
	CGO_ENABLED=1 "$GO" test -c -tags "$TAGS" -o "$work/bin/$(echo "$pkg" | tr / _).test" "./$pkg" ||
		die "compile the tests of ./$pkg"
done
[ -e "$ROOTS/base" ] || NSBOX_ROOTS_DIR=$ROOTS bin/nsbox run --policy default -c pass >/dev/null ||
	die "build the base root in $ROOTS"
[ -e "$ROOTS/datasci" ] || die "no datasci root in $ROOTS (make datasci)"
t_build=$(now)

# 4. KVM where it works: /dev/kvm usable and a guest that boots with it
# within the bound (a nested KVM can stall in the kernel's decompressor);
# else software emulation.
accel=${NSBOX_V2_ACCEL:-auto}
vng_accel=(--disable-kvm)
case $accel in
auto)
	if [ -r /dev/kvm ] && [ -w /dev/kvm ] &&
		timeout 20 vng --run "$kernel" -m 512M -p 1 --exec 'echo nsbox-kvm-probe-ok' </dev/null 2>/dev/null |
		grep -q nsbox-kvm-probe-ok; then
		accel=kvm
	else
		accel=tcg
	fi ;;
kvm | tcg) ;;
*) die "NSBOX_V2_ACCEL=$accel: want auto, kvm or tcg" ;;
esac
[ "$accel" = kvm ] && vng_accel=()
t_probe=$(now)
log "kernel $kernel, accel $accel, ./tests -run '$run_pattern'"

# 5. A fresh ext4 disk for the guest's /tmp: the tests' state dirs, audit
# logs and workspaces. Not a tmpfs: the guest's kernel cannot idmap one
# (Linux 6.3 can), and the tests' workspaces are idmapped.
img=$work/scratch.ext4
rm -f "$img"
truncate -s 16G "$img"
mkfs.ext4 -q -F -O ^has_journal "$img" || die "mkfs.ext4 $img"

# 6. Boot and test. The roots are shared read-only at /mnt; the guest's
# last line is its verdict, which must be there: a guest that died
# without one has not run the tests.
out=$work/guest.log
# timeout(1) runs QEMU in a process group of its own and passes a
# SIGTERM or SIGINT of this script on to it.
timeout "${NSBOX_V2_TIMEOUT:-40m}" vng --run "$kernel" "${vng_accel[@]}" -m 4G -p 2 \
	--rodir="/mnt=$ROOTS" --disk "$repo/$img" \
	--exec "$repo/scripts/test-v2/guest.sh $repo $repo/$work/bin $accel '$run_pattern'" </dev/null >"$out" 2>&1 &
guest=$!
trap 'kill -TERM $guest 2>/dev/null' TERM INT
tail -f --pid=$guest "$out" &
rc=0
wait $guest || rc=$?
wait
trap - TERM INT
t_guest=$(now)
rm -f "$img"
log "apt $((t_apt - t0)) s, venv $((t_venv - t_apt)) s, compile $((t_build - t_venv)) s," \
	"kvm probe $((t_probe - t_build)) s, guest $((t_guest - t_probe)) s (accel $accel)"
verdict=$(grep -a '^nsbox-v2-guest: verdict ' "$out" | tail -n 1 | awk '{print $3}' || true)
if [ -z "$verdict" ]; then
	die "the guest gave no verdict (vng exit $rc): it did not boot or died; see $out"
fi
if [ "$verdict" != 0 ] || [ "$rc" != 0 ]; then
	die "FAILED in the cgroup v2 guest (verdict $verdict, vng exit $rc); see $out"
fi
log "passed in the cgroup v2 guest"
