#!/usr/bin/env bash
# lock-root.sh: (re)generate policies/NAME.lock, the hash-pinned package
# set of the built-in root NAME (datasci, datasci-min, web), from the
# root's short top-level list below.
#
#   scripts/lock-root.sh NAME            reproduce: resolve NAME's TOP with every
#                                        other package held at the version already
#                                        in the lock, re-download, re-hash, rewrite
#   scripts/lock-root.sh NAME --upgrade  re-resolve the dependencies to the newest
#                                        versions TOP allows (after editing TOP)
#   scripts/lock-root.sh NAME --check    regenerate into a temp file and diff it
#                                        against the lock; exit 1 if they differ
#   --out FILE                           write FILE instead of policies/NAME.lock
#
# How: pip (run by $PYTHON, default python3, which must be CPython 3.11 on
# Linux x86_64 because pip evaluates environment markers with it) resolves
# the set for the target interpreter -- CPython 3.11, cp311 ABI, glibc 2.36
# (Debian 12's /usr/bin/python3.11), wheels only -- with `pip install
# --dry-run --report`; every resolved package must come as a wheel whose
# tags fit that target, else the script stops and names it. The wheels are
# then downloaded (`pip download --no-deps --require-hashes`, pip's cache
# is used), sha256-hashed here, checked against the index's hash, and the
# lock is written atomically, sorted by name, with each wheel's file name,
# size, the packages that need it and its top-level import names as
# comments. No build code runs
# (--only-binary=:all:). The lock installs with
#   pip install --require-hashes --only-binary=:all: --no-deps -r policies/NAME.lock
#
# Import names: a wheel's "# imports:" line lists what a program can import
# from it, read from the wheel's RECORD (top_level.txt is optional and
# missing from many wheels): each top-level package directory and module
# file (.py, or an extension module .so) whose name is a public identifier.
# Left out: *.dist-info, *.data, __pycache__, vendored-library directories
# (numpy.libs: not identifiers), and private names (_x): a package's own
# imports of its private modules are internal and pass the runner's
# allowlist anyway, and a program has no business importing them, as for
# the standard library's private modules. The policies' allowlists and
# sandbox/pyrunner's package lists are generated from these lines
# (`go generate ./sandbox/pyrunner`).
set -euo pipefail

die() { echo "lock-root: $*" >&2; exit 1; }

case ${1:-} in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 1 ] && [ "${1#-}" = "$1" ] || { echo "lock-root: the first argument names the root: datasci, datasci-min or web (see --help)" >&2; exit 2; }
name=$1
shift

# Each root's top-level list: the only versions chosen by hand; SUMMARY
# says what the root holds, in the lock's first lines.
case $name in
datasci)
	# What data agents use daily, as both E2B's code-interpreter template
	# and OpenAI's code interpreter preinstall: tables (pandas), Excel
	# (openpyxl), Parquet (pyarrow), statistics and models (scipy,
	# statsmodels, scikit-learn) and charts (matplotlib, seaborn).
	TOP=(
		numpy==2.4.6
		pandas==3.1.1
		matplotlib==3.11.2
		openpyxl==3.1.5
		pyarrow==26.0.1
		scipy==1.17.1
		seaborn==0.13.2
		scikit-learn==1.9.1
		statsmodels==0.15.0
	)
	SUMMARY="numpy, pandas, matplotlib, openpyxl, pyarrow, scipy, seaborn, scikit-learn and statsmodels" ;;
datasci-min)
	# The leaner data root: tables, arrays and charts only.
	TOP=(
		numpy==2.4.6
		pandas==3.1.1
		matplotlib==3.11.2
	)
	SUMMARY="numpy, pandas and matplotlib" ;;
web)
	# certifi: the CA certificates the root's programs verify TLS with.
	TOP=(
		requests==2.34.2
		httpx==0.28.1
		certifi==2026.10.19.post1
	)
	SUMMARY="requests, httpx and certifi" ;;
*) die "unknown root $name (roots with a lock: datasci, datasci-min, web)" ;;
esac

# The target: what the lock will be installed into.
TARGET_PYTHON_VERSION=3.11
TARGET_ABI=cp311
TARGET_GLIBC_MINOR=36 # glibc 2.36 (Debian 12)
TARGET_ARCH=x86_64

PYTHON=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/policies/$name.lock
upgrade=0
check=0

while [ $# -gt 0 ]; do
	case $1 in
	--upgrade) upgrade=1 ;;
	--check) check=1 ;;
	--out)
		[ $# -ge 2 ] || { echo "lock-root: --out needs a FILE" >&2; exit 2; }
		out=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "lock-root: unknown argument: $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

"$PYTHON" - "$TARGET_PYTHON_VERSION" "$TARGET_ARCH" <<'EOF' || die "\$PYTHON ($PYTHON) must be CPython $TARGET_PYTHON_VERSION on Linux $TARGET_ARCH with pip: pip evaluates environment markers with it"
import platform, sys
want, arch = sys.argv[1], sys.argv[2]
ok = (platform.python_implementation() == "CPython" and "%d.%d" % sys.version_info[:2] == want
      and sys.platform == "linux" and platform.machine() == arch)
try:
    import pip  # noqa: F401
except ImportError:
    ok = False
sys.exit(0 if ok else 1)
EOF

pip_version=$("$PYTHON" -m pip --version | awk '{print $2}')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every platform tag pip on the target accepts, most preferred first, as
# pip itself orders them: manylinux_2_36 .. manylinux_2_17 (= manylinux2014,
# which pip extends to manylinux2010 and manylinux1).
platform_flags=()
for ((m = TARGET_GLIBC_MINOR; m >= 17; m--)); do
	platform_flags+=(--platform "manylinux_2_${m}_${TARGET_ARCH}")
done
platform_flags+=(--platform "manylinux2014_${TARGET_ARCH}")
target_flags=(--only-binary=:all: "${platform_flags[@]}"
	--python-version "$TARGET_PYTHON_VERSION" --implementation cp --abi "$TARGET_ABI")

# Reproduce mode: hold every package at the version in the current lock.
constraints=()
if [ "$upgrade" -eq 0 ] && [ -f "$out" ]; then
	grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==[^ ]+' "$out" | sed 's/[[:space:]]*\\$//' >"$tmp/constraints.txt" || true
	if [ -s "$tmp/constraints.txt" ]; then
		constraints=(-c "$tmp/constraints.txt")
	fi
fi

echo "lock-root: resolving ${TOP[*]} for CPython $TARGET_PYTHON_VERSION/$TARGET_ABI, glibc 2.$TARGET_GLIBC_MINOR $TARGET_ARCH (pip $pip_version)" >&2
if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed \
	--target "$tmp/never-written" --report "$tmp/report.json" \
	"${target_flags[@]}" "${constraints[@]}" "${TOP[@]}"; then
	if [ ${#constraints[@]} -gt 0 ]; then
		die "resolution failed; if TOP changed, the versions held from the lock may no longer fit: rerun with --upgrade"
	fi
	die "resolution failed (a package with no fitting wheel is named above)"
fi

# Check the resolution and write the pins with the index's hashes.
"$PYTHON" - "$tmp/report.json" "$tmp/pins.json" "$tmp/pins.txt" "$TARGET_ABI" "$TARGET_GLIBC_MINOR" "$TARGET_ARCH" <<'EOF'
import json, re, sys
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

report_path, pins_json, pins_txt, abi, glibc_minor, arch = sys.argv[1:]
glibc_minor = int(glibc_minor)
report = json.load(open(report_path))
env = report["environment"]

def fail(msg):
    sys.exit("lock-root: " + msg)

def platform_ok(tag):
    if tag == "any":
        return True
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    if m:
        return m.group(3) == arch and (int(m.group(1)), int(m.group(2))) <= (2, glibc_minor)
    legacy = {"manylinux1": 5, "manylinux2010": 12, "manylinux2014": 17}
    m = re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014)_(\w+)", tag)
    return bool(m) and m.group(2) == arch and legacy[m.group(1)] <= glibc_minor

pins = {}
for item in report["install"]:
    meta = item["metadata"]
    name, version = canonicalize_name(meta["name"]), meta["version"]
    info = item["download_info"]
    url = info["url"]
    filename = url.rsplit("/", 1)[-1].split("#", 1)[0]
    if not filename.endswith(".whl"):
        fail(f"{name}=={version}: no wheel (would use {filename}); refusing an entry without a wheel")
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        fail(f"{name}=={version}: cannot parse wheel name {filename}")
    py, wabi, plat = parts[-3:]
    if wabi not in (abi, "abi3", "none") or not any(platform_ok(p) for p in plat.split(".")):
        fail(f"{name}=={version}: wheel {filename} does not fit {abi} glibc 2.{glibc_minor} {arch}")
    sha = info.get("archive_info", {}).get("hashes", {}).get("sha256")
    if not sha:
        fail(f"{name}=={version}: the index gave no sha256 for {filename}")
    pins[name] = {"name": name, "version": version, "filename": filename, "index_sha256": sha,
                  "requires": meta.get("requires_dist") or [], "requested": item.get("requested", False)}

# Which locked package needs which (markers evaluated for the target, no extras).
for p in pins.values():
    p["via"] = []
for p in pins.values():
    for spec in p["requires"]:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate(dict(env, extra="")):
            continue
        dep = canonicalize_name(req.name)
        if dep not in pins:
            fail(f"{p['name']} needs {spec!r} but the resolution has no {dep}")
        pins[dep]["via"].append(p["name"])

json.dump(pins, open(pins_json, "w"), indent=1, sort_keys=True)
with open(pins_txt, "w") as f:
    for name in sorted(pins):
        p = pins[name]
        f.write(f"{name}=={p['version']} --hash=sha256:{p['index_sha256']}\n")
EOF

echo "lock-root: downloading $(wc -l <"$tmp/pins.txt") wheels" >&2
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
	"${target_flags[@]}" -d "$tmp/wheels" -r "$tmp/pins.txt"

# Hash what was downloaded, cross-check, write the lock.
"$PYTHON" - "$name" "$SUMMARY" "$tmp/pins.json" "$tmp/wheels" "$tmp/lock" "$pip_version" "$TARGET_PYTHON_VERSION" "$TARGET_ABI" "$TARGET_GLIBC_MINOR" "$TARGET_ARCH" "${TOP[@]}" <<'EOF'
import hashlib, json, os, sys, zipfile
from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename

root_name, summary, pins_json, wheel_dir, lock_path, pip_version, pyver, abi, glibc_minor, arch, *top = sys.argv[1:]
pins = json.load(open(pins_json))

def fail(msg):
    sys.exit("lock-root: " + msg)

def import_names(path):
    """The public top-level import names of the wheel at path, from its
    RECORD: package directories and module files (.py, .so)."""
    with zipfile.ZipFile(path) as z:
        records = [n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            fail(f"{os.path.basename(path)}: expected one *.dist-info/RECORD, found {records or 'none'}")
        text = z.read(records[0]).decode("utf-8")
    names = set()
    for line in text.splitlines():
        entry = line.rsplit(",", 2)[0].strip('"')
        if not entry:
            continue
        first, sep, _ = entry.partition("/")
        if sep:  # a directory: a package, unless it is metadata or data
            name = first
        elif first.endswith(".py"):
            name = first[:-3]
        elif first.endswith(".so"):
            name = first.split(".", 1)[0]
        else:
            continue  # a .pth file, a license at the top
        if name.isidentifier() and not name.startswith("_"):
            names.add(name)
    return sorted(names)

files = {}
for fn in os.listdir(wheel_dir):
    if not fn.endswith(".whl"):
        fail(f"pip downloaded {fn}, which is not a wheel; refusing")
    name, version, _, _ = parse_wheel_filename(fn)
    files.setdefault((canonicalize_name(name), str(version)), []).append(fn)

entries, total = [], 0
for name in sorted(pins):
    p = pins[name]
    found = files.pop((name, p["version"]), [])
    if len(found) != 1:
        fail(f"{name}=={p['version']}: expected one wheel, found {found or 'none'}; refusing an entry without a wheel")
    fn = found[0]
    path = os.path.join(wheel_dir, fn)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    sha = h.hexdigest()
    if sha != p["index_sha256"]:
        fail(f"{fn}: sha256 {sha} differs from the index's {p['index_sha256']}")
    size = os.path.getsize(path)
    total += size
    via = ", ".join(sorted(p["via"])) if p["via"] else "top level"
    if p["via"] and name in {canonicalize_name(t.split("==")[0]) for t in top}:
        via = "top level; " + via
    entries.append((name, p["version"], sha, fn, size, via, import_names(path)))
if files:
    fail(f"unexpected wheels downloaded: {sorted(files)}")

def mib(n):
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"

lines = [
    f"# policies/{root_name}.lock: the package set of the `{root_name}` root:",
    f"# {summary} with every runtime dependency, each pinned to",
    "# one version and to the sha256 of its wheel. Generated; do not edit by hand.",
    "#",
    f"# Top level: {' '.join(top)}",
    f"# Target: CPython {pyver} ({abi}), Linux {arch}, glibc 2.{glibc_minor} (Debian 12's",
    "# /usr/bin/python3.11); wheels only (manylinux up to 2.%s, or pure Python)." % glibc_minor,
    f"# Made by scripts/lock-root.sh {root_name} with pip {pip_version}: `pip install --dry-run --report`",
    "# resolves the set for that target (--only-binary=:all: --platform ... --abi ...),",
    "# `pip download --require-hashes` fetches each wheel, the script hashes it.",
    "#",
    f"# Regenerate: scripts/lock-root.sh {root_name}            (same versions, re-hashed)",
    f"#             scripts/lock-root.sh {root_name} --upgrade  (after editing TOP in the script)",
    f"#             scripts/lock-root.sh {root_name} --check    (verify this file; exit 1 on a diff)",
    "# Install:    pip install --require-hashes --only-binary=:all: --no-deps \\",
    f"#                 -r policies/{root_name}.lock --python <venv python>",
    "#",
    f"# {len(entries)} wheels, {total} bytes ({mib(total)}) in all.",
]
for name, version, sha, fn, size, via, imports in entries:
    lines += ["", f"# {fn} ({mib(size)}); needed by: {via}",
              "# imports: " + (", ".join(imports) if imports else "(none)"),
              f"{name}=={version} \\", f"    --hash=sha256:{sha}"]
with open(lock_path, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"lock-root: {len(entries)} wheels, {total} bytes ({mib(total)})", file=sys.stderr)
EOF

if [ "$check" -eq 1 ]; then
	if diff -u "$out" "$tmp/lock"; then
		echo "lock-root: $out is up to date" >&2
		exit 0
	fi
	die "$out differs from what the script generates (diff above)"
fi
mkdir -p "$(dirname "$out")"
cp "$tmp/lock" "$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
echo "lock-root: wrote $out" >&2
