"""The Python SDK's figures: the wheel, its install, one-shot latency.

Usage (as root, after `make wheel` and `make datasci`; `make bench-sdk`
does both):

    python3 bench/sdk_latency.py [--runs N] [--json-out PATH]

It measures, for the wheel in dist/:
  - its size;
  - a user's install to first result, in a fresh venv: `python -m venv`
    (with pip), `pip install` of the wheel, then a first nsbox.run, each
    step timed;
  - one-shot latency of `nsbox.run("print(1)")` through the SDK, by
    subprocess (no service) and through an `nsbox serve` of the wheel's
    binary (its default pool), beside bare
    `subprocess.run(["python3", "-c", "print(1)"])` (/usr/bin/python3),
    interleaved run by run, N runs each (default 40): medians and p95,
    measured inside one Python process of the venv, as an SDK user sees
    them;
  - the latency of a session cell, `Sandbox.run_code("1")`.
Results go to stdout and bench/results/sdk.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in the venv's Python: the measurements an SDK user sees.
LATENCY = r"""
import json, subprocess, sys, time
import nsbox
runs, server = int(sys.argv[1]), sys.argv[2]
def bare():
    subprocess.run(["python3", "-c", "print(1)"], check=True, stdout=subprocess.DEVNULL)
def sub():
    assert nsbox.run("print(1)").stdout == "1\n"
def svc():
    assert nsbox.run("print(1)", server=server).stdout == "1\n"
methods = {"bare python3 -c": bare, "nsbox.run, subprocess": sub, "nsbox.run, service": svc}
for f in methods.values():  # warm-up: roots, page cache, the pool
    f()
times = {k: [] for k in methods}
for _ in range(runs):
    for k, f in methods.items():
        t = time.perf_counter()
        f()
        times[k].append((time.perf_counter() - t) * 1000)
        time.sleep(0.05)  # lets the service's pool refill, as between a caller's requests
with nsbox.Sandbox(policy="default", server=server) as sb:
    sb.run_code("1")
    cells = []
    for _ in range(runs):
        t = time.perf_counter()
        sb.run_code("1")
        cells.append((time.perf_counter() - t) * 1000)
times["Sandbox.run_code, service"] = cells
print(json.dumps(times))
"""


def pct(xs: list, p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--json-out", default=os.path.join(REPO, "bench", "results", "sdk.json"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("sdk_latency: needs root (nsbox runs as root)", file=sys.stderr)
        return 2
    wheels = glob.glob(os.path.join(REPO, "dist", "nsbox-*.whl"))
    if len(wheels) != 1:
        print(f"sdk_latency: want one dist/nsbox-*.whl (make wheel), found {wheels}", file=sys.stderr)
        return 2
    wheel = wheels[0]
    python = os.environ.get("NSBOX_SDK_PYTHON", "/usr/bin/python3.11")
    tmp = tempfile.mkdtemp(prefix="nsbox-bench-sdk-")
    os.chmod(tmp, 0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("NSBOX_BIN", "NSBOX_SERVER")}
    # python3 is the system's, not a version manager's shim (a script
    # that would add its own start-up to the bare figure).
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    out: dict = {"wheel": os.path.basename(wheel), "wheel_bytes": os.path.getsize(wheel), "runs": args.runs}
    svc = None
    try:
        venv = os.path.join(tmp, "venv")
        t0 = time.perf_counter()
        subprocess.run([python, "-m", "venv", venv], check=True, env=env)
        t1 = time.perf_counter()
        subprocess.run(
            [os.path.join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", "--no-index", wheel],
            check=True,
            env=env,
        )
        t2 = time.perf_counter()
        first = subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c", "import nsbox; print(nsbox.run('print(1)').stdout, end='')"],
            check=True, env=env, capture_output=True, text=True,
        )
        t3 = time.perf_counter()
        assert first.stdout == "1\n", first
        out["install_ms"] = {
            "venv": (t1 - t0) * 1000, "pip_install": (t2 - t1) * 1000, "first_run": (t3 - t2) * 1000,
            "total": (t3 - t0) * 1000,
        }
        sock = os.path.join(tmp, "s", "nsbox.sock")
        os.mkdir(os.path.dirname(sock), 0o700)
        svc = subprocess.Popen(
            [os.path.join(venv, "bin", "nsbox"), "serve", "--listen=unix:" + sock, "--policies=default"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not os.path.exists(sock):
            if svc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("nsbox serve did not start")
            time.sleep(0.05)
        time.sleep(2)  # the pool fills
        p = subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c", LATENCY, str(args.runs), "unix:" + sock],
            check=True, env=env, capture_output=True, text=True,
        )
        times = json.loads(p.stdout)
        out["latency_ms"] = {
            k: {"median": statistics.median(v), "p95": pct(v, 95), "min": min(v)} for k, v in times.items()
        }
    finally:
        if svc is not None:
            svc.send_signal(signal.SIGTERM)
            svc.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"wheel: {out['wheel']}, {out['wheel_bytes'] / 2**20:.1f} MiB")
    i = out["install_ms"]
    print(
        f"fresh venv to first result: {i['total'] / 1000:.2f} s (venv {i['venv'] / 1000:.2f} s, "
        f"pip install {i['pip_install'] / 1000:.2f} s, first nsbox.run {i['first_run'] / 1000:.2f} s)"
    )
    print(f"one-shot latency, {args.runs} runs each, interleaved (ms):")
    print(f"  {'method':28} {'median':>8} {'p95':>8} {'min':>8}")
    for k, v in out["latency_ms"].items():
        print(f"  {k:28} {v['median']:8.1f} {v['p95']:8.1f} {v['min']:8.1f}")
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
