#!/usr/bin/env python3
"""Benchmark: `import pandas` inside the datasci root
versus the same venv outside any sandbox.

  A  $NSBOX_BIN run --policy $NSBOX_POLICY -c "import pandas"
  B  bench/.venv-datasci/bin/python -c "import pandas"   (no sandbox)

The venv of B is made from policies/datasci.lock (`make datasci-venv`), the
same locked wheels the datasci root is built from. After --warmups warm-up
runs of each (not counted), A and B run --runs times, interleaved run by run
(the order inside a pair alternates, AB then BA, so neither side always
comes first). Reported: median, p95, mean, min and max wall time of each,
the median of the per-pair ratios A_i/B_i, and the median CPU time (user +
sys of the process tree, from getrusage). Every run must exit 0, else the
benchmark stops and shows that run's stderr.

Output: a Markdown table on stdout (also written next to the JSON as .md)
and a JSON file, by default bench/results/pandas-import.json
(bench/results/pandas-import-B.json with --only B).

B gets the environment nsbox gives the sandboxed program where it can
change import time: PYTHONDONTWRITEBYTECODE=1, the policy's [env] table
(e.g. MPLBACKEND=Agg) and OMP_NUM_THREADS, OPENBLAS_NUM_THREADS,
MKL_NUM_THREADS set to the policy's cpus rounded up, as nsbox does (numpy's
OpenBLAS starts that many threads at import); the policy is read from
policies/<policy>.toml, or the file given as a path. Set BENCH_THREADS=N to
force N threads, or BENCH_THREADS=inherit to leave those three alone.

Environment: NSBOX_BIN (default bin/nsbox), NSBOX_POLICY (default datasci),
DATASCI_VENV (default bench/.venv-datasci), BENCH_RUNS (default 30),
BENCH_WARMUPS (default 3); relative paths are taken from the repository
root. Flags override them. Stdlib only; runs with any Python >= 3.11.
"""

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_RUNS = 30


def repo_path(p):
    return p if os.path.isabs(p) else os.path.join(REPO, p)


def parse_args():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=int(env("BENCH_RUNS", "30")),
                    help="measured runs of each side (>= %d for a valid result)" % MIN_RUNS)
    ap.add_argument("--warmups", type=int, default=int(env("BENCH_WARMUPS", "3")))
    ap.add_argument("--nsbox", default=env("NSBOX_BIN", "bin/nsbox"), help="nsbox binary (env NSBOX_BIN)")
    ap.add_argument("--policy", default=env("NSBOX_POLICY", "datasci"),
                    help="nsbox policy: built-in name or TOML path (env NSBOX_POLICY)")
    ap.add_argument("--venv", default=env("DATASCI_VENV", "bench/.venv-datasci"),
                    help="venv made from policies/datasci.lock (env DATASCI_VENV)")
    ap.add_argument("--code", default="import pandas", help="program run by both sides")
    ap.add_argument("--only", choices=["A", "B"], help="run one side alone (no ratio)")
    ap.add_argument("--json-out", help="JSON result file (default bench/results/pandas-import[-SIDE].json)")
    return ap.parse_args()


def policy_env(policy):
    """What nsbox adds to the program's environment under the policy that can
    change import time: its [env] table and *_NUM_THREADS = cpus rounded up.
    Empty if the policy file cannot be read (a built-in without a file)."""
    path = policy if os.path.isabs(policy) else os.path.join(REPO, "policies", policy + ".toml")
    try:
        with open(path, "rb") as f:
            pol = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        pol = {}
    env = {k: str(v) for k, v in pol.get("env", {}).items()}
    cpus = pol.get("limits", {}).get("cpus")
    threads = None if cpus is None else max(1, math.ceil(cpus))
    forced = os.environ.get("BENCH_THREADS")
    if forced:
        threads = None if forced == "inherit" else int(forced)
    if threads is not None:
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[k] = str(threads)
    return env


def timed(cmd, env):
    """Run cmd; return (wall seconds, cpu seconds of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = (time.perf_counter_ns() - t0) / 1e9
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("bench: %s exited %d\nstdout: %s\nstderr: %s" % (
            " ".join(cmd), p.returncode, p.stdout.decode(errors="replace")[-2000:],
            p.stderr.decode(errors="replace")[-4000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def p95(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]  # nearest rank


def summary(xs):
    return {"n": len(xs), "median": statistics.median(xs), "p95": p95(xs), "mean": statistics.fmean(xs),
            "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0, "min": min(xs), "max": max(xs)}


def output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError as e:
        return "unavailable: %s" % e


def sha256(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    a = parse_args()
    if a.runs < 1 or a.warmups < 0:
        sys.exit("bench: --runs must be >= 1 and --warmups >= 0")
    nsbox, venv = repo_path(a.nsbox), repo_path(a.venv)
    vpython = os.path.join(venv, "bin", "python")
    sides = [a.only] if a.only else ["A", "B"]
    if "A" in sides and not os.access(nsbox, os.X_OK):
        sys.exit("bench: no nsbox binary at %s (make build, or set NSBOX_BIN)" % nsbox)
    if "B" in sides and not os.access(vpython, os.X_OK):
        sys.exit("bench: no venv at %s (make datasci-venv, or set DATASCI_VENV)" % venv)
    if a.runs < MIN_RUNS:
        print("bench: warning: %d runs < %d; the result is marked invalid" % (a.runs, MIN_RUNS), file=sys.stderr)

    if "/" in a.policy or a.policy.endswith(".toml"):
        a.policy = os.path.abspath(a.policy)  # a policy file, as nsbox would read it from here
    added = dict(policy_env(a.policy), PYTHONDONTWRITEBYTECODE="1")
    benv = dict(os.environ, **added)
    cmds = {
        "A": [nsbox, "run", "--policy", a.policy, "-c", a.code],
        "B": [vpython, "-c", a.code],
    }
    envs = {"A": dict(os.environ), "B": benv}
    labels = {
        "A": "A: nsbox run --policy %s" % a.policy,
        "B": "B: venv python, no sandbox",
    }

    for i in range(a.warmups):
        for s in sides:
            timed(cmds[s], envs[s])
    wall = {s: [] for s in sides}
    cpu = {s: [] for s in sides}
    for i in range(a.runs):
        order = sides if i % 2 == 0 else sides[::-1]
        for s in order:
            w, c = timed(cmds[s], envs[s])
            wall[s].append(w)
            cpu[s].append(c)
        if sys.stderr.isatty():
            print("\rbench: %d/%d" % (i + 1, a.runs), end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)

    res = {
        "benchmark": "pandas-import",
        "valid": a.runs >= MIN_RUNS,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "code": a.code,
        "runs": a.runs,
        "warmups": a.warmups,
        "order": "interleaved, AB then BA alternately" if len(sides) == 2 else "single side",
        "unit": "seconds",
        "commands": {s: cmds[s] for s in sides},
        "b_env_added": added if "B" in sides else None,
        "host": {"kernel": platform.release(), "cpu": cpu_model(), "nproc": os.cpu_count(),
                 "loadavg": os.getloadavg()},
        "lock_sha256": sha256(os.path.join(REPO, "policies", "datasci.lock")),
        "nsbox_version": output([nsbox, "--version"]) if "A" in sides else None,
        "venv_python": output([vpython, "-c", "import sys; print(sys.version.split()[0])"]) if "B" in sides else None,
        "venv_packages": output([vpython, "-c", "import importlib.metadata as m; print(' '.join(sorted("
                                 "d.metadata['Name'].lower() + '==' + d.version for d in m.distributions())))"])
        if "B" in sides else None,
        "wall": {s: summary(wall[s]) for s in sides},
        "cpu": {s: summary(cpu[s]) for s in sides},
        "samples": {"wall": wall, "cpu": cpu},
    }
    if len(sides) == 2:
        ratios = [x / y for x, y in zip(wall["A"], wall["B"])]
        res["ratio_a_over_b"] = {"median_of_pair_ratios": statistics.median(ratios), "p95_of_pair_ratios": p95(ratios),
                                 "ratio_of_medians": res["wall"]["A"]["median"] / res["wall"]["B"]["median"],
                                 "median_of_pair_differences": statistics.median(
                                     x - y for x, y in zip(wall["A"], wall["B"]))}
        res["samples"]["ratio"] = ratios

    ms = lambda x: "%.1f" % (x * 1000)  # noqa: E731
    md = ["`%s`: %d runs each after %d warm-ups%s; wall time in ms." % (
        a.code, a.runs, a.warmups, ", interleaved" if len(sides) == 2 else ""), "",
        "| side | median | p95 | mean | min | max | median CPU |",
        "|---|---:|---:|---:|---:|---:|---:|"]
    for s in sides:
        w = res["wall"][s]
        md.append("| %s | %s | %s | %s | %s | %s | %s |" % (labels[s], ms(w["median"]), ms(w["p95"]), ms(w["mean"]),
                                                        ms(w["min"]), ms(w["max"]), ms(res["cpu"][s]["median"])))
    if len(sides) == 2:
        r = res["ratio_a_over_b"]
        md += ["", "| A/B | median of per-pair ratios | p95 of per-pair ratios | ratio of medians | median A-B (ms) |",
               "|---|---:|---:|---:|---:|",
               "| | %.2f | %.2f | %.2f | %s |" % (r["median_of_pair_ratios"], r["p95_of_pair_ratios"],
                                                r["ratio_of_medians"], ms(r["median_of_pair_differences"]))]
    if not res["valid"]:
        md += ["", "**Not valid: fewer than %d runs.**" % MIN_RUNS]
    md_text = "\n".join(md) + "\n"

    out = repo_path(a.json_out) if a.json_out else os.path.join(
        REPO, "bench", "results", "pandas-import%s.json" % ("-" + a.only if a.only else ""))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    for path, text in ((out, json.dumps(res, indent=2) + "\n"), (os.path.splitext(out)[0] + ".md", md_text)):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    print(md_text, end="")
    print("bench: wrote %s" % out, file=sys.stderr)


if __name__ == "__main__":
    main()
