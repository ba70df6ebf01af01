#!/usr/bin/env bash
# install-deps.sh: make sure this machine has what building and testing
# nsbox needs. As root on Debian/Ubuntu it installs missing packages with
# apt-get; otherwise it names exactly what is missing and fails.
set -euo pipefail

missing_pkgs=()
problems=()

need_cmd() { # need_cmd COMMAND DEBIAN_PACKAGE
	command -v "$1" >/dev/null 2>&1 || missing_pkgs+=("$2")
}
need_file() { # need_file PATH DEBIAN_PACKAGE
	[ -e "$1" ] || missing_pkgs+=("$2")
}

# The built-in roots (base, datasci, web) are built from Debian's Python.
need_file /usr/bin/python3.11 python3.11
need_file /usr/lib/python3.11/os.py libpython3.11-stdlib
# go test -race and libseccomp-golang need cgo, so a C compiler; the
# binary links Debian's static libseccomp.a (libseccomp-dev), found with
# pkg-config.
need_cmd gcc gcc
need_cmd pkg-config pkg-config
need_file /usr/include/seccomp.h libseccomp-dev
need_file "/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/libseccomp.a" libseccomp-dev

# A test measures the supervisor's peak memory through GNU time, a small
# parent (tests/supervisor_memory_test.go).
need_file /usr/bin/time time

# Rootless mode maps a subordinate id range with the setuid helpers
# newuidmap and newgidmap; its tests run nsbox as a user useradd makes.
need_cmd newuidmap uidmap
need_cmd useradd passwd

# The rootfs builder installs locked wheels with pip's --python (pip 22.3+),
# run by python3; Debian's python3-pip is new enough.
if ! python3 -m pip --version >/dev/null 2>&1; then
	missing_pkgs+=(python3-pip)
fi

if ! command -v go >/dev/null 2>&1; then
	problems+=("Go 1.26 or newer is not installed (https://go.dev/doc/install; Debian's golang package is too old)")
else
	gov=$(go env GOVERSION | sed 's/^go//')
	major=${gov%%.*}; rest=${gov#*.}; minor=${rest%%.*}
	if [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 26 ]; }; then
		problems+=("Go $gov is too old: nsbox needs Go 1.26 or newer")
	fi
fi

if [ ${#missing_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "install-deps: apt-get install ${missing_pkgs[*]}" >&2
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}" >/dev/null
	else
		problems+=("missing Debian packages: ${missing_pkgs[*]} (as root: apt-get install ${missing_pkgs[*]})")
	fi
fi

if [ ${#problems[@]} -gt 0 ]; then
	printf 'install-deps: %s\n' "${problems[@]}" >&2
	exit 1
fi
