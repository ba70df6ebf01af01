#!/usr/bin/env bash
# apparmor.sh: check that deploy/apparmor/nsbox compiles, with an
# apparmor_parser that knows the `userns` rule (AppArmor 4), without loading
# anything into a kernel (-Q: skip the kernel load; -K: no cache), and that
# the same profile with a rule broken is refused, so the check cannot pass
# without reading the profile.
#
# The parser: the host's when it is AppArmor 4 or later; otherwise (Debian
# 12 has 3.0, which refuses `userns`) Debian 13's apparmor package, fetched
# with apt into $CACHE (its own lists, nothing installed on the host) and
# run with Debian 13's C library from the same place. Run by `make
# apparmor-check`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
profile="$repo/deploy/apparmor/nsbox"
CACHE=${CACHE:-$repo/deploy/.apparmor}
SUITE=${SUITE:-trixie}

major() { "$@" --config-file /dev/null --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -n1; }

parser=()
base=/etc/apparmor.d
if command -v apparmor_parser >/dev/null && [ "$(major apparmor_parser)" -ge 4 ] 2>/dev/null && [ -d /etc/apparmor.d/abi ]; then
	parser=(apparmor_parser)
else
	root="$CACHE/root"
	if [ ! -e "$CACHE/.complete" ]; then
		rm -rf "$CACHE"
		mkdir -p "$CACHE/lists/partial" "$CACHE/archives/partial" "$CACHE/debs" "$root"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" >"$CACHE/sources.list"
		apt=(-o "Dir::Etc::SourceList=$CACHE/sources.list" -o Dir::Etc::SourceParts=/nonexistent
			-o "Dir::State::Lists=$CACHE/lists" -o "Dir::Cache=$CACHE" -o "Dir::Cache::archives=$CACHE/archives"
			-o Dir::State::status=/dev/null -o APT::Architectures=amd64 -o Debug::NoLocking=1 -qq)
		apt-get "${apt[@]}" update
		(cd "$CACHE/debs" && apt-get "${apt[@]}" download apparmor libc6 2>&1 | grep -v 'unsandboxed' || true)
		for deb in "$CACHE"/debs/apparmor_*.deb "$CACHE"/debs/libc6_*.deb; do
			[ -f "$deb" ] || { echo "apparmor-check: apt-get download from $SUITE gave no $deb" >&2; exit 1; }
			dpkg-deb -x "$deb" "$root"
		done
		touch "$CACHE/.complete"
	fi
	lib="$root/usr/lib/x86_64-linux-gnu"
	parser=("$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$root/usr/sbin/apparmor_parser")
	base="$root/etc/apparmor.d"
fi

# compile prints the parser's errors (not its note that this kernel has no
# AppArmor to cache for) and fails when it does.
compile() {
	local out rc=0
	out=$("${parser[@]}" --config-file /dev/null --skip-kernel-load --skip-cache --base "$base" "$1" 2>&1) || rc=$?
	grep -v '^Cache read/write disabled: interface file missing' <<<"$out" || true
	return "$rc"
}

echo "apparmor-check: $("${parser[@]}" --config-file /dev/null --version | head -n1)"
if ! compile "$profile"; then
	echo "apparmor-check: FAIL: $profile does not compile" >&2
	exit 1
fi
names=$("${parser[@]}" --config-file /dev/null --base "$base" -N "$profile" 2>/dev/null)
if [ "$names" != nsbox ]; then
	echo "apparmor-check: FAIL: $profile defines profiles [$names], want exactly nsbox" >&2
	exit 1
fi
echo "apparmor-check: ok: $profile compiles (profile nsbox)"

# The negative check: the rule that matters, misspelt, must be refused.
broken=$(mktemp)
trap 'rm -f "$broken"' EXIT
sed 's/^  userns,$/  usernz,/' "$profile" >"$broken"
if cmp -s "$profile" "$broken"; then
	echo "apparmor-check: FAIL: no line '  userns,' in $profile to break" >&2
	exit 1
fi
if compile "$broken" >/dev/null; then
	echo "apparmor-check: FAIL: a profile with 'usernz,' for 'userns,' was accepted: the parser checks nothing" >&2
	exit 1
fi
echo "apparmor-check: ok: the same profile with 'usernz,' is refused"
