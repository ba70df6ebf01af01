"""Roots and packages for `make bench` (bench.py imports this module):
what a root costs to lock and to build, full and layered.

  lock       `nsbox rootfs lock` of datasci's top-level list (a fresh lock,
             resolved against the package index with uv's cache warm): the
             command's own elapsed_ms, --lock-runs times
  full       `nsbox rootfs build` of datasci-min and of datasci from their
             locks into a scratch directory (pip's cache warm): the builder's
             elapsed_ms, files and bytes, once each
  layered    `nsbox rootfs build --from` that scratch datasci with one small
             extra wheel (a lock made by `nsbox rootfs lock`), --layer-runs
             times: elapsed_ms, and the bytes of the files the child does not
             share with its parent (a file counted once however many links)

Every part that fails is noted and left out; the package index must be
reachable (the lock and a first build download)."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3.11"

# datasci's top level, as scripts/lock-root.sh lists it, unpinned: what an
# agent builder would write in a requirements file.
LOCK_LIST = ["numpy", "pandas", "matplotlib", "openpyxl", "scipy", "seaborn",
             "scikit-learn", "statsmodels", "pyarrow"]
# One small pure-Python package that no built-in root has.
EXTRA = "tabulate"


class RootBenchError(Exception):
    pass


def _json_tail(out):
    """The last JSON line of a command's output."""
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RootBenchError("no JSON line in: %s" % out[-500:])


def _run(cmd, timeout=1200):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise RootBenchError("%s exited %d: %s" % (" ".join(cmd[:4]), r.returncode, (r.stdout + r.stderr)[-2000:]))
    return r, wall


def lock(nsbox, tmp, runs):
    reqs = os.path.join(tmp, "requirements.txt")
    with open(reqs, "w") as f:
        f.write("\n".join(LOCK_LIST) + "\n")
    samples, last = [], None
    for i in range(runs):
        out = os.path.join(tmp, "lock-%d.lock" % i)
        r, _ = _run([nsbox, "rootfs", "lock", "--json", "-o", out, reqs], timeout=600)
        last = _json_tail(r.stdout)
        samples.append(last["elapsed_ms"])
        os.remove(out)
    return {"runs": runs, "requirements": LOCK_LIST, "packages": len(last["packages"]),
            "elapsed_ms_median": statistics.median(samples), "samples_ms": samples}


def build(nsbox, args):
    r, _ = _run([nsbox, "rootfs", "build", "--json"] + args)
    d = _json_tail(r.stdout)
    if not d.get("done"):
        raise RootBenchError("rootfs build: %s" % d)
    return d


def inodes(gen):
    """(dev, ino) -> size of every regular file under gen."""
    out = {}
    for dirpath, _, files in os.walk(gen):
        for n in files:
            st = os.lstat(os.path.join(dirpath, n))
            if (st.st_mode & 0o170000) == 0o100000:
                out[(st.st_dev, st.st_ino)] = st.st_size
    return out


def full_and_layered(nsbox, tmp, runs, notes):
    out = {"full": {}, "layered": None}
    parent = None
    for name in ("datasci-min", "datasci"):
        lockfile = os.path.join(REPO, "policies", name + ".lock")
        if not os.path.exists(lockfile):
            notes.append("roots: no policies/%s.lock; its full build is not measured" % name)
            continue
        dst = os.path.join(tmp, "full-" + name)
        print("bench: [roots] full build of %s" % name, file=sys.stderr, flush=True)
        d = build(nsbox, ["--python", PY, "--lock", lockfile, "--out", dst])
        out["full"][name] = {"elapsed_ms": d["elapsed_ms"], "files": d["files"], "bytes": d["bytes"],
                             "packages": len(d.get("packages") or [])}
        if name == "datasci":
            parent = dst
        else:
            shutil.rmtree(os.path.realpath(dst), ignore_errors=True)
            os.remove(dst)
    if parent is None:
        return out
    reqs = os.path.join(tmp, "extra.txt")
    with open(reqs, "w") as f:
        f.write(EXTRA + "\n")
    extra = os.path.join(tmp, "extra.lock")
    _run([nsbox, "rootfs", "lock", "-o", extra, reqs], timeout=600)
    parent_inodes = inodes(os.path.realpath(parent))
    samples, new_bytes, new_files = [], 0, 0
    for i in range(runs):
        child = os.path.join(tmp, "child-%d" % i)
        print("bench: [roots] layered build %d/%d" % (i + 1, runs), file=sys.stderr, flush=True)
        d = build(nsbox, ["--from", parent, "--lock", extra, "--out", child])
        samples.append(d["elapsed_ms"])
        mine = {k: v for k, v in inodes(os.path.realpath(child)).items() if k not in parent_inodes}
        new_bytes, new_files = sum(mine.values()), len(mine)
        _run([nsbox, "rootfs", "remove", child])
    out["layered"] = {"runs": runs, "extra": EXTRA, "elapsed_ms_median": statistics.median(samples),
                      "samples_ms": samples, "new_files": new_files, "new_bytes": new_bytes}
    _run([nsbox, "rootfs", "remove", parent])
    return out


def measure(nsbox, tmp, lock_runs, layer_runs, notes):
    res = {}
    try:
        print("bench: [roots] rootfs lock, %d runs" % lock_runs, file=sys.stderr, flush=True)
        res["lock"] = lock(nsbox, tmp, lock_runs)
    except (RootBenchError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        notes.append("roots: rootfs lock failed: %s" % str(e).splitlines()[0][:300])
    try:
        res.update(full_and_layered(nsbox, tmp, layer_runs, notes))
    except (RootBenchError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        notes.append("roots: a root build failed: %s" % str(e).splitlines()[0][:300])
    return res


def _mib(b):
    return "%.1f MiB" % (b / 1048576)


def markdown(res):
    if not res:
        return []
    L = ["## Roots: locking and building packages", "",
         "`nsbox rootfs lock` and `nsbox rootfs build`, with uv's and pip's caches warm (the wheels are",
         "downloaded once, by the first build of the lock), each command's own `elapsed_ms`.%s" % (
             " Measured on its own, at %s (1-minute load %s at the end), not in the run of the tables above." % (
                 res["measured_at"], res["load_at_end"][0]) if res.get("measured_at") else ""), "",
         "| What | time | files | size | runs |", "|---|---:|---:|---:|---:|"]
    lk = res.get("lock")
    if lk:
        L.append("| `rootfs lock` of %s (%d packages in the lock) | %.2f s | | | %d |" % (
            ", ".join(lk["requirements"]), lk["packages"], lk["elapsed_ms_median"] / 1000, lk["runs"]))
    for name, f in (res.get("full") or {}).items():
        L.append("| full `rootfs build` of `%s` (%d packages) | %.1f s | %d | %s | 1 |" % (
            name, f["packages"], f["elapsed_ms"] / 1000, f["files"], _mib(f["bytes"])))
    ly = res.get("layered")
    if ly:
        L.append("| layered `rootfs build --from datasci` + `%s` (files and size: not shared with the parent) | %.2f s | %d | %s | %d |" % (
            ly["extra"], ly["elapsed_ms_median"] / 1000, ly["new_files"], _mib(ly["new_bytes"]), ly["runs"]))
    L.append("")
    return L
