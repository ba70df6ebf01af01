#!/usr/bin/env bash
# pin-runnerlibs.sh: (re)vendor the runner's own Python library, the
# pure-Python RestrictedPython wheel the runner compiles programs with
# under python.mode "restricted", into sandbox/pyrunner/runnerlibs/ and
# pin its sha256 in runnerlibs.lock. Never run by make: the wheel is
# committed, and every root build checks it against the lock.
#
#   scripts/pin-runnerlibs.sh VERSION     e.g. scripts/pin-runnerlibs.sh 9.0
#
# pip downloads the wheel only (--no-deps --only-binary=:all:: no build
# code runs; RestrictedPython has no dependencies). After it: go test
# ./sandbox/pyrunner/... (the restricted suites) and rebuild the roots
# (the runner's file name carries the wheel's digest, so roots built with
# another wheel are rebuilt, the base root on its next run).
set -euo pipefail
version=${1:?usage: scripts/pin-runnerlibs.sh VERSION}
dir=$(cd "$(dirname "$0")/../sandbox/pyrunner/runnerlibs" && pwd)
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
	--dest "$tmp" "RestrictedPython==$version"
wheel=$(ls "$tmp"/restrictedpython-"$version"-py3-none-any.whl)
sum=$(sha256sum "$wheel" | cut -d' ' -f1)
rm -f "$dir"/restrictedpython-*.whl
cp "$wheel" "$dir/"
cat >"$dir/runnerlibs.lock" <<LOCK
# The runner's own Python library, shipped in every root (runnerlibs.go).
# Pure-Python wheel, vendored next to this file; re-pin with
# scripts/pin-runnerlibs.sh, never by make.
RestrictedPython==$version --hash=sha256:$sum
LOCK
echo "pinned RestrictedPython==$version sha256:$sum"
