#!/usr/bin/env python3
"""`make bench`: the cold-start cost of nsbox, layer by layer, against bare
python, bubblewrap and runc, and the other figures the documentation links
to (docs/benchmarks.md is the only page with measured numbers).

Every method M is paired with a baseline B (bare /usr/bin/python3.11 running
the same workload; for the cgroups-off and pandas methods see below). After
--warmups warm-up pairs (not counted), M and B run --runs times INTERLEAVED
run by run: M B M B ... Per method the harness reports:

  median, p95 (nearest rank)    wall time of M, ms
  ratio                          median of the per-pair ratios M_i / B_i
  overhead                       median of the per-pair differences M_i - B_i, ms
  runs/s                         sequential cold runs per second = 1000 / mean ms
  peak RSS                       ru_maxrss from wait4() on the process we start
                                 (for nsbox: the supervisor; the kernel folds in the
                                 max RSS of the descendants it reaped, see below)

Every run must exit 0, else the harness stops and shows that run's stderr.

Methods (workload `pass` unless named):
  bare python, bare python -I -S
  nsbox strict, default, datasci (skipped when the datasci root is missing)
  nsbox default with one layer changed, policies written to a temp dir from
    policies/default.toml: seccomp = "none"; landlock = false; the Python
    layer off (imports ["*"], no denied builtins or events); verify = "full"
    (a layer switched ON); audit DB on tmpfs (NSBOX_AUDIT_DB=/dev/shm/...)
  cgroups off: nsbox with a permissive-derived policy inside
    unshare --mount --propagation private sh -c 'mount -t tmpfs none /sys/fs/cgroup && exec "$0" "$@"'
    and, for a fair comparison, the same policy without the wrapper and the
    same wrapper around bare python
  bwrap (all namespaces, read-only /usr) and runc (OCI bundle on the base root,
    read-only, pid/net/ipc/uts/mount/cgroup namespaces, no user namespace,
    runc's default spec otherwise), when installed (as root the harness
    installs them with apt-get unless --no-install)
  workload `stdlib` (import json,re; sum of squares): bare, strict, default,
    bwrap, runc
  workload `prog200` (a 200-odd-line ordinary program from a file, what
    strict's compile pays for): bare, strict, default
  workload `pandas` (import pandas + a DataFrame sum): nsbox datasci versus
    bench/.venv-datasci/bin/python with the environment nsbox sets
    (bench/pandas_import.py's policy_env); fewer runs (--pandas-runs)

Peak RSS: wait4()'s ru_maxrss is max(RSS of the process, max RSS of the
children it reaped), so for nsbox it is max(supervisor, init, python). A
second, short pass (--rss-runs) samples /proc/PID/status VmHWM of the nsbox
process itself until it exits: the supervisor's own high-water mark (a lower
bound; the last sample before exit).

Extras (unless --only names methods without "extras"): the sizes of the
binaries, the compiled runner and the built-in roots (from their manifests);
where a `-c pass` run's time goes, as the median of each --trace-phases phase
over --phase-runs runs under strict and datasci; `nsbox rootfs verify` (the
full re-hash) on each built-in root, --verify-runs times; and building base
into a scratch directory, --build-runs times.

Supervisor memory (unless --only names neither it nor "supervisor-memory"):
the nsbox process's peak RSS (ru_maxrss through GNU time, else sampled VmHWM)
for a program that writes past the output cap, for caps of 1 MiB, 64 MiB and
1 GiB (--supmem-caps), plain and --json, one stream and both; one run each.

Timeouts (unless --only names neither it nor "timeouts"): runs of a
`--timeout 1s` busy loop, 1, 8 and 16 at a time (--timeout-parallel), with
--timeout-spinners CPU spinners beside them (killed at the end): the
distributions of duration_ms - timeout, of the kill's lateness (the
program's end, from --trace-phases, minus its deadline) and of the wall
time seen by the harness minus the timeout.

Roots (unless --only names neither it nor "roots"; bench/rootbench.py): the
time of `nsbox rootfs lock` of datasci's top-level list, full builds of
datasci-min and datasci into a scratch directory (their size), and layered
builds of one small extra package on that datasci.

Service (unless --only names neither it nor "service"; bench/servicebench.py):
nsbox serve on a Unix socket driven by a client in this process: one-shot
print(1) through the pool against bare python -c, a pandas snippet through
the datasci pool against a running interpreter, a datasci session's
df.describe() cell (p50, p99), sustained runs/s with 8 clients, the pools'
refill rate and the service's RSS with 0, 10 and 50 idle sessions.

Output: bench/results/bench.json (every sample) and docs/benchmarks.md (the
table, the machine and how to reproduce). Stdlib only; Python >= 3.11; root.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no bench/__pycache__
from pandas_import import policy_env  # noqa: E402  (same directory)
import servicebench  # noqa: E402  (same directory)
import rootbench  # noqa: E402  (same directory)
import netbench  # noqa: E402  (same directory)

PY = "/usr/bin/python3.11"
STDLIB_CODE = "import json,re; sum(i*i for i in range(100000))"
PANDAS_CODE = 'import pandas; pandas.DataFrame({"a": range(1000)}).sum()'


def prog200():
    """A 200-line ordinary program (classes, properties, comprehensions,
    f-strings, exceptions, generators): what strict's restricted compile
    pays for, as against `-c pass`."""
    block = """
class Shape{i}:
    def __init__(self, w, h):
        self.w, self.h = w, h

    @property
    def area(self):
        return self.w * self.h

    def scaled(self, k):
        return Shape{i}(self.w * k, self.h * k)


def stats{i}(xs):
    total = sum(x * x for x in xs if x % 2 == {p})
    pairs = {{k: v for k, v in zip("abcdef", xs)}}
    try:
        ratio = total / len(pairs)
    except ZeroDivisionError:
        ratio = 0.0
    return f"{{total}}-{{ratio:.2f}}-{{Shape{i}(2, 3).scaled(2).area}}"

"""
    lines = []
    for i in range(10):
        lines += block.format(i=i, p=i % 2).splitlines()[1:]
    lines.append("print(len([stats%d(range(%d)) for _ in range(3)]))" % (9, 50))
    return "\n".join(lines) + "\n"
CGWRAP = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
          'mount -t tmpfs none /sys/fs/cgroup && exec "$0" "$@"']
ROOTS = os.environ.get("NSBOX_ROOTS_DIR", "/var/lib/nsbox/roots")


def rp(p):
    return p if os.path.isabs(p) else os.path.join(REPO, p)


def parse_args():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=int(env("BENCH_RUNS", "30")), help="pairs per fast method (>= 30)")
    ap.add_argument("--pandas-runs", type=int, default=int(env("BENCH_PANDAS_RUNS", "30")))
    ap.add_argument("--warmups", type=int, default=int(env("BENCH_WARMUPS", "3")))
    ap.add_argument("--rss-runs", type=int, default=int(env("BENCH_RSS_RUNS", "5")))
    ap.add_argument("--phase-runs", type=int, default=int(env("BENCH_PHASE_RUNS", "30")),
                    help="--trace-phases runs per policy (extras)")
    ap.add_argument("--verify-runs", type=int, default=int(env("BENCH_VERIFY_RUNS", "5")),
                    help="nsbox rootfs verify runs per built-in root (extras)")
    ap.add_argument("--build-runs", type=int, default=int(env("BENCH_BUILD_RUNS", "3")),
                    help="builds of base into a scratch directory (extras)")
    ap.add_argument("--lock-runs", type=int, default=int(env("BENCH_LOCK_RUNS", "3")),
                    help="nsbox rootfs lock runs of datasci's list (roots)")
    ap.add_argument("--layer-runs", type=int, default=int(env("BENCH_LAYER_RUNS", "3")),
                    help="layered builds on datasci (roots)")
    ap.add_argument("--supmem-caps", default=env("BENCH_SUPMEM_CAPS", "1MiB,64MiB,1GiB"),
                    help="output caps of the supervisor-memory section")
    ap.add_argument("--timeout-parallel", default=env("BENCH_TIMEOUT_PARALLEL", "1,8,16"),
                    help="runs at a time in the timeouts section")
    ap.add_argument("--timeout-spinners", type=int, default=int(env("BENCH_TIMEOUT_SPINNERS", "4")),
                    help="CPU spinners beside the timeouts section's runs")
    ap.add_argument("--nsbox", default=env("NSBOX_BIN", "bin/nsbox"))
    ap.add_argument("--venv", default=env("DATASCI_VENV", "bench/.venv-datasci"))
    ap.add_argument("--only", help="comma-separated substrings: run only methods whose name contains one "
                    "(and the extras, supervisor-memory and timeouts sections only if one names them)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install bubblewrap/runc")
    ap.add_argument("--json-out", default="bench/results/bench.json")
    ap.add_argument("--md-out", default="docs/benchmarks.md")
    ap.add_argument("--render", metavar="JSON", help="only rewrite --md-out from a results JSON (no runs)")
    return ap.parse_args()


# --- running ---------------------------------------------------------------

class RunError(Exception):
    pass


def run_once(cmd, env, sample_hwm=False):
    """Run cmd; return (wall ms, ru_maxrss KiB, sampled VmHWM KiB or None).
    Output goes to a temp file (shown if the run fails); the child is reaped
    with os.wait4() for its rusage."""
    with tempfile.TemporaryFile() as log:
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        hwm = [None]
        stop = threading.Event()
        if sample_hwm:
            def poll():
                path = "/proc/%d/status" % p.pid
                while not stop.is_set():
                    try:
                        with open(path) as f:
                            for line in f:
                                if line.startswith("VmHWM:"):
                                    hwm[0] = max(hwm[0] or 0, int(line.split()[1]))
                    except (OSError, ValueError):
                        pass
                    time.sleep(0.001)
            threading.Thread(target=poll, daemon=True).start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = (time.perf_counter_ns() - t0) / 1e6
        stop.set()
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            log.seek(0)
            raise RunError("%s exited %d\noutput: %s" % (
                " ".join(map(str, cmd)), p.returncode, log.read().decode(errors="replace")[-3000:]))
    return wall, ru.ru_maxrss, hwm[0]


TIME = "/usr/bin/time"


def rss_pass(m, k):
    """ru_maxrss of the method's process, through GNU time (its wait4()):
    time's children start from time's small address space, not from this
    harness's. Largest over k runs; None without /usr/bin/time."""
    if k <= 0 or not os.access(TIME, os.X_OK):
        return None
    out = []
    for _ in range(k):
        with tempfile.NamedTemporaryFile("r") as f:
            run_once([TIME, "-f", "%M", "-o", f.name] + list(m["cmd"]), m["env"])
            out.append(int(f.read().split()[-1]))
    return max(out)


def p95(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def run_retry(cmd, env, failures):
    """One retry for a run that fails (a busy shared host can kill one); the
    failure is recorded. A second failure stops the method."""
    try:
        return run_once(cmd, env)
    except RunError as e:
        failures.append(str(e)[:500])
        return run_once(cmd, env)


def measure(m, base, runs, warmups):
    """Interleave m and base: m base m base ..."""
    fails = []
    for _ in range(warmups):
        run_retry(m["cmd"], m["env"], fails)
        run_retry(base["cmd"], base["env"], fails)
    a, b, rss, brss = [], [], [], []
    for _ in range(runs):
        w, r, _ = run_retry(m["cmd"], m["env"], fails)
        a.append(w)
        rss.append(r)
        w, r, _ = run_retry(base["cmd"], base["env"], fails)
        b.append(w)
        brss.append(r)
    ratios = [x / y for x, y in zip(a, b)]
    diffs = [x - y for x, y in zip(a, b)]
    return {
        "n": runs, "median_ms": statistics.median(a), "p95_ms": p95(a), "mean_ms": statistics.fmean(a),
        "min_ms": min(a), "max_ms": max(a),
        "ratio_median": statistics.median(ratios), "overhead_ms_median": statistics.median(diffs),
        "runs_per_s": 1000.0 / statistics.fmean(a),
        # polluted by the harness's own RSS (fork + exec keep the larger
        # high-water mark); the RSS pass below measures it properly
        "wait4_maxrss_kib_from_harness": max(rss),
        "base_median_ms": statistics.median(b), "base_p95_ms": p95(b), "retried_failures": fails,
        "samples_ms": [round(x, 3) for x in a], "base_samples_ms": [round(x, 3) for x in b],
    }


# --- methods ---------------------------------------------------------------

def derive_policy(text, kind):
    """policies/default.toml with one layer changed."""
    def sub(pat, repl):
        nonlocal text
        new, n = re.subn(pat, repl, text, count=1, flags=re.M | re.S)
        if n != 1:
            raise SystemExit("bench: cannot derive policy %s: %r not found" % (kind, pat))
        text = new
    if kind == "no-seccomp":
        sub(r'^seccomp = "[^"]*"', 'seccomp = "none"')
        sub(r'^require = \[[^\]]*\]', 'require = ["namespaces", "cgroups"]')
    elif kind == "no-landlock":
        sub(r'^landlock = true', 'landlock = false')
    elif kind == "no-pylayer":
        sub(r'^imports = \[[^\]]*\]', 'imports = ["*"]')
        sub(r'^deny_builtins = \[[^\]]*\]', 'deny_builtins = []')
        sub(r'^deny_events = \[[^\]]*\]', 'deny_events = []')
    elif kind == "verify-full":
        sub(r'^verify = "quick"', 'verify = "full"')
    return text


def which(name):
    return shutil.which(name) or next((p for p in ("/usr/sbin/" + name, "/usr/bin/" + name) if os.path.exists(p)), None)


def ensure_tools(no_install, notes):
    want = {"bwrap": "bubblewrap", "runc": "runc"}
    missing = [pkg for tool, pkg in want.items() if not which(tool)]
    if missing and not no_install and os.geteuid() == 0 and shutil.which("apt-get"):
        print("bench: apt-get install -y %s" % " ".join(missing), file=sys.stderr)
        r = subprocess.run(["apt-get", "install", "-y"] + missing, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            notes.append("apt-get install %s failed: %s" % (" ".join(missing), r.stderr.decode(errors="replace")[-300:]))
    for tool, pkg in want.items():
        if not which(tool):
            notes.append("%s is missing (Debian package %s): its rows are skipped." % (tool, pkg))
    return which("bwrap"), which("runc")


def runc_bundle(tmp, runc, code):
    d = os.path.join(tmp, "runc-%d" % abs(hash(code)))
    os.makedirs(d, exist_ok=True)
    subprocess.run([runc, "spec", "--bundle", d], check=True)
    cfgp = os.path.join(d, "config.json")
    with open(cfgp) as f:
        c = json.load(f)
    c["process"]["terminal"] = False
    c["process"]["args"] = ["/venv/bin/python", "-c", code]
    # A copy: runc creates missing mount points (/sys) in the rootfs, which
    # would make nsbox's base root fail its manifest check.
    rootfs = os.path.join(tmp, "runc-rootfs")
    if not os.path.isdir(rootfs):
        subprocess.run(["cp", "-a", os.path.join(ROOTS, "base", "."), rootfs], check=True)  # the generation, not the symlink
    c["root"] = {"path": rootfs, "readonly": True}
    ns = c["linux"]["namespaces"]
    if not any(n["type"] == "cgroup" for n in ns):
        ns.append({"type": "cgroup"})
    with open(cfgp, "w") as f:
        json.dump(c, f, indent=1)
    return d, [n["type"] for n in ns]


class RuncCmd(list):
    """runc run needs a fresh container id every time."""
    counter = 0

    def __iter__(self):
        RuncCmd.counter += 1
        args = list.__iter__(self)
        items = list(args)
        items[-1] = "nsbox-bench-%d-%d" % (os.getpid(), RuncCmd.counter)
        return iter(items)


def build_methods(a, tmp, notes):
    nsbox = rp(a.nsbox)
    base_env = dict(os.environ)
    with open(os.path.join(REPO, "policies", "default.toml")) as f:
        default_text = f.read()
    with open(os.path.join(REPO, "policies", "permissive.toml")) as f:
        perm_text = f.read()
    pol = {}
    for kind in ("no-seccomp", "no-landlock", "no-pylayer", "verify-full"):
        pol[kind] = os.path.join(tmp, kind + ".toml")
        with open(pol[kind], "w") as f:
            f.write(derive_policy(default_text, kind))
    pol["permissive"] = os.path.join(tmp, "permissive.toml")
    with open(pol["permissive"], "w") as f:
        f.write(perm_text)  # "permissive-derived": as shipped; only namespaces required
    audit_tmpfs = "/dev/shm/nsbox-bench-%d/audit.db" % os.getpid()
    os.makedirs(os.path.dirname(audit_tmpfs), exist_ok=True)

    def M(name, layer, cmd, workload="pass", env=None, base=None, runs=None, note=""):
        return {"name": name, "layer": layer, "workload": workload, "cmd": cmd, "env": env or base_env,
                "base": base, "runs": runs or a.runs, "note": note, "nsbox": False}

    def bare(code):
        return {"cmd": [PY, "-c", code], "env": base_env, "label": "bare python3.11 -c <same>"}

    def ns(policy, code="pass"):
        return [nsbox, "run", "--policy", policy, "-c", code]

    meths = []
    prog = os.path.join(tmp, "prog200.py")
    with open(prog, "w") as f:
        f.write(prog200())
    PB = {"cmd": [PY, prog], "env": base_env, "label": "bare python3.11 prog200.py"}
    meths += [
        M("bare python3.11", "", [PY, prog], "prog200", base=PB),
        M("nsbox strict", "all layers", [nsbox, "run", "--policy", "strict", prog], "prog200", base=PB),
        M("nsbox default", "all layers (reference)", [nsbox, "run", "--policy", "default", prog], "prog200",
          base=PB),
    ]
    # strict as it is, against strict with its Python layer in guarded
    # mode: what RestrictedPython's compile and guards cost.
    with open(os.path.join(REPO, "policies", "strict.toml")) as f:
        strict_text = f.read()
    restricted = 'mode = "restricted"'
    if restricted in strict_text:
        pol["strict-guarded"] = os.path.join(tmp, "strict-guarded.toml")
        with open(pol["strict-guarded"], "w") as f:
            f.write(strict_text.replace(restricted, 'mode = "guarded"', 1))
        for wl, cmd in (("pass", ["-c", "pass"]), ("prog200", [prog])):
            meths.append(M("nsbox strict, guarded mode", "python layer mode",
                           [nsbox, "run", "--policy", pol["strict-guarded"]] + cmd, wl,
                           base=PB if wl == "prog200" else bare("pass"),
                           note='strict with python.mode = "guarded" (no RestrictedPython)'))
    else:
        notes.append("policies/strict.toml has no python.mode = \"restricted\": no guarded-mode rows.")
    for wl, code in (("pass", "pass"), ("stdlib", STDLIB_CODE)):
        B = bare(code)
        meths += [
            M("bare python3.11", "", [PY, "-c", code], wl, base=B),
            M("bare python3.11 -I -S", "", [PY, "-I", "-S", "-c", code], wl, base=B),
            M("nsbox strict", "all layers", ns("strict", code), wl, base=B),
            M("nsbox default", "all layers (reference)", ns("default", code), wl, base=B),
        ]
        if wl == "pass":
            if os.path.isdir(os.path.join(ROOTS, "datasci")):
                meths.append(M("nsbox datasci", "all layers", ns("datasci"), wl, base=B))
            else:
                notes.append("%s/datasci is missing (make datasci): the datasci rows are skipped." % ROOTS)
            meths += [
                M("nsbox default, seccomp off", "seccomp", ns(pol["no-seccomp"]), wl, base=B,
                  note='seccomp = "none" (and not required)'),
                M("nsbox default, landlock off", "landlock", ns(pol["no-landlock"]), wl, base=B,
                  note="landlock = false"),
                M("nsbox default, Python layer off", "python layer", ns(pol["no-pylayer"]), wl, base=B,
                  note='imports ["*"], no denied builtins/events'),
                M("nsbox default, verify full", "rootfs verify", ns(pol["verify-full"]), wl, base=B,
                  note='verify = "full": a layer switched ON'),
                M("nsbox default, audit on tmpfs", "audit", ns("default"), wl, base=B,
                  env=dict(base_env, NSBOX_AUDIT_DB=audit_tmpfs), note="NSBOX_AUDIT_DB=" + audit_tmpfs),
                M("nsbox permissive", "cgroups (with)", ns(pol["permissive"]), wl, base=B,
                  note="permissive: only namespaces required; cgroups on"),
                M("unshare+tmpfs cgroup wrapper, bare python3.11", "cgroups (wrapper cost)",
                  CGWRAP + [PY, "-c", code], wl, base=B, note="the wrapper alone"),
                M("unshare+tmpfs cgroup wrapper, nsbox permissive", "cgroups (without)",
                  CGWRAP + ns(pol["permissive"]), wl, base=B, note="no cgroup fs visible: cgroup none"),
            ]
        if wl == "pass":
            meths += rootless_methods(M, ns, tmp, base_env, default_text, B, notes)
            meths += netbench.network_methods(M, ns, tmp, bare)
        if a.bwrap:
            meths.append(M("bwrap", "peer", [a.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                                            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                                            "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
                                            "--tmpfs", "/tmp", PY, "-c", code], wl, base=B,
                           note="--unshare-all (user, ipc, pid, net, uts, cgroup), ro /usr; no cgroup limits, no seccomp"))
        if a.runc:
            if os.path.isdir(os.path.join(ROOTS, "base")):
                d, nslist = runc_bundle(tmp, a.runc, code)
                meths.append(M("runc", "peer", RuncCmd([a.runc, "run", "--bundle", d, "ID"]), wl, base=B,
                               note="rootfs: a copy of %s/base, read-only; namespaces %s; no user ns; runc spec defaults"
                               % (ROOTS, "/".join(nslist))))
            else:
                notes.append("%s/base is missing: runc skipped (run bin/nsbox once)." % ROOTS)

    # pandas: nsbox datasci versus the venv outside any sandbox
    venv_py = os.path.join(rp(a.venv), "bin", "python")
    if not os.path.isdir(os.path.join(ROOTS, "datasci")):
        pass  # noted above
    elif not os.path.exists(venv_py):
        notes.append("%s is missing (make datasci-venv): the pandas rows are skipped." % venv_py)
    else:
        venv_env = dict(base_env, PYTHONDONTWRITEBYTECODE="1", **policy_env("datasci"))
        VB = {"cmd": [venv_py, "-c", PANDAS_CODE], "env": venv_env, "label": "bench/.venv-datasci python -c <same>"}
        meths.append(M("nsbox datasci", "all layers", ns("datasci", PANDAS_CODE), "pandas", base=VB,
                       runs=a.pandas_runs, note="versus the venv with nsbox's env (threads = cpus)"))
        meths.append(M("venv python (no sandbox)", "", [venv_py, "-c", PANDAS_CODE], "pandas", env=venv_env,
                       base=VB, runs=a.pandas_runs))
    for m in meths:
        m["nsbox"] = any(x == nsbox for x in list(m["cmd"]))
    if a.only:
        keys = [k.strip() for k in a.only.split(",") if k.strip()]
        meths = [m for m in meths if any(k in m["name"] + " " + m["workload"] for k in keys)]
    return meths


# --- rootless mode: the same run as an ordinary user ---------------------------
ROOTLESS_USER = "nsbox-rootless"  # the account tests/rootless_test.go makes


def rootless_methods(M, ns, tmp, base_env, default_text, B, notes):
    """Rows for rootless mode's cold start: default's layers without its
    cgroup requirement (no cgroup can be delegated on a v1 host), as root
    and as the rootless tests' account, with its subordinate ids and with
    its own uid alone. setpriv switches to the account; its own exec is in
    the "setpriv, bare" row."""
    import pwd
    try:
        pw = pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        notes.append("no account %s (make test creates it): the rootless rows are skipped." % ROOTLESS_USER)
        return []
    setpriv = which("setpriv")
    if not setpriv:
        notes.append("setpriv (util-linux) is missing: the rootless rows are skipped.")
        return []
    pol = os.path.join(tmp, "rootless.toml")
    with open(pol, "w") as f:
        f.write('extends = "default"\n\n[sandbox]\nrequire = ["namespaces", "seccomp", "memfd_noexec"]\n')
    os.chmod(tmp, 0o755)
    home = os.path.join(tmp, "rootless-home")
    os.makedirs(home, exist_ok=True)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    env = {k: v for k, v in base_env.items() if k not in ("NSBOX_STATE_DIR", "NSBOX_AUDIT_DB", "NSBOX_ID_RANGE", "HOME")}
    env["HOME"] = home
    as_user = [setpriv, "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid, "--clear-groups"]
    note = "default without its cgroup requirement"
    return [
        M("setpriv, bare python3.11", "", as_user + B["cmd"], "pass", env=env, base=B, note="the account switch alone"),
        M("nsbox rootless-policy, as root", "rootless (reference)", ns(pol), "pass", base=B,
          note=note + "; root mode, so with a cgroup"),
        M("nsbox rootless-policy, rootless", "rootless", as_user + ns(pol), "pass", env=env, base=B,
          note=note + "; subordinate ids; no cgroup"),
        M("nsbox rootless-policy, rootless, own uid", "rootless", as_user + ns(pol), "pass",
          env=dict(env, NSBOX_USERNS_IDS="single"), base=B, note=note + "; the account's uid alone; no cgroup"),
    ]


# --- extras: sizes, phases, root checks --------------------------------------

def file_size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def sizes(nsbox):
    """Sizes of what a run uses: the binaries, the compiled runner, and each
    built-in root's regular files, manifest and header (from the manifest)."""
    out = {"nsbox": file_size(nsbox), "nsbox_init": file_size(os.path.join(os.path.dirname(nsbox), "nsbox-init")),
           "runner_source": file_size(os.path.join(REPO, "sandbox", "pyrunner", "runner.py")),
           "runner_compiled": None, "roots": {}}
    runner = output([nsbox, "rootfs", "runner-path"])
    for name in ("base", "datasci"):
        meta = os.path.join(ROOTS, name, ".nsbox")
        try:
            with open(os.path.join(meta, "manifest.json")) as f:
                man = json.load(f)
            with open(os.path.join(meta, "root.json")) as f:
                hdr = json.load(f)
        except (OSError, ValueError):
            continue
        files = [e for e in man["files"] if e["type"] == "file"]
        out["roots"][name] = {
            "files": len(files), "paths": len(man["files"]), "bytes": sum(e["size"] for e in files),
            "manifest_bytes": file_size(os.path.join(meta, "manifest.json")),
            "header_bytes": file_size(os.path.join(meta, "root.json")), "critical": len(hdr["critical"]),
            "packages": len((man.get("lock") or {}).get("packages") or []),
        }
        if name == "base" and runner.startswith("/"):
            out["runner_compiled"] = file_size(os.path.join(ROOTS, name) + runner)
    return out


def trace_phases(nsbox, policy, runs, warmups):
    """Median of each --trace-phases phase of `nsbox run --policy P -c pass`,
    in the order the phases come, with the median duration_ms and the wall
    time the harness saw."""
    cmd = [nsbox, "run", "--json", "--trace-phases", "--policy", policy, "-c", "pass"]
    per, order, durations, walls = {}, [], [], []
    for i in range(warmups + runs):
        t0 = time.perf_counter_ns()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        wall = (time.perf_counter_ns() - t0) / 1e6
        if r.returncode != 0:
            raise RunError("%s exited %d\noutput: %s" % (" ".join(cmd), r.returncode, (r.stdout + r.stderr)[-3000:]))
        if i < warmups:
            continue
        res = json.loads(r.stdout)
        walls.append(wall)
        durations.append(res["duration_ms"])
        for ph in res.get("phases") or []:
            if ph["name"] not in per:
                per[ph["name"]] = []
                order.append(ph["name"])
            per[ph["name"]].append(ph["ms"])
    return {"policy": policy, "runs": runs, "wall_ms_median": statistics.median(walls),
            "duration_ms_median": statistics.median(durations),
            "phases": [{"name": n, "n": len(per[n]), "median_ms": statistics.median(per[n])} for n in order]}


def verify_times(nsbox, runs):
    """Wall time of `nsbox rootfs verify ROOT` (every file re-hashed) per
    built-in root: median and samples."""
    out = {}
    for name in ("base", "datasci"):
        root = os.path.join(ROOTS, name)
        if not os.path.isdir(os.path.join(root, ".nsbox")):
            continue
        xs = [run_once([nsbox, "rootfs", "verify", root], dict(os.environ))[0] for _ in range(runs)]
        out[name] = {"runs": runs, "median_ms": statistics.median(xs), "samples_ms": [round(x, 3) for x in xs]}
    return out


def build_times(nsbox, tmp, runs):
    """`nsbox rootfs build` of base into a scratch directory: the builder's
    own elapsed_ms, files and bytes (its final JSON line), median of runs."""
    out = []
    for i in range(runs):
        dst = os.path.join(tmp, "base-build-%d" % i)
        r = subprocess.run([nsbox, "rootfs", "build", "--json", "--python", PY, "--out", dst],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RunError("rootfs build exited %d: %s" % (r.returncode, (r.stdout + r.stderr)[-3000:]))
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
        shutil.rmtree(dst, ignore_errors=True)
    return {"runs": runs, "elapsed_ms_median": statistics.median(d["elapsed_ms"] for d in out),
            "files": out[-1]["files"], "bytes": out[-1]["bytes"], "samples_ms": [d["elapsed_ms"] for d in out]}


def extras(a, nsbox, tmp, notes):
    """The figures besides the method tables; a failing part is noted and
    left out, never fatal."""
    ex = {"sizes": sizes(nsbox), "phases": [], "verify": {}, "build_base": None}
    for policy in ("strict", "datasci"):
        if policy == "datasci" and not os.path.isdir(os.path.join(ROOTS, "datasci")):
            continue
        print("bench: [extras] --trace-phases, %s, %d runs" % (policy, a.phase_runs), file=sys.stderr, flush=True)
        try:
            ex["phases"].append(trace_phases(nsbox, policy, a.phase_runs, a.warmups))
        except (RunError, ValueError, subprocess.TimeoutExpired) as e:
            notes.append("extras: --trace-phases under %s failed: %s" % (policy, str(e).splitlines()[0][:300]))
    print("bench: [extras] rootfs verify, %d runs per root" % a.verify_runs, file=sys.stderr, flush=True)
    try:
        ex["verify"] = verify_times(nsbox, a.verify_runs)
    except RunError as e:
        notes.append("extras: rootfs verify failed: %s" % str(e).splitlines()[0][:300])
    if a.build_runs > 0:
        print("bench: [extras] rootfs build of base, %d runs" % a.build_runs, file=sys.stderr, flush=True)
        try:
            ex["build_base"] = build_times(nsbox, tmp, a.build_runs)
        except (RunError, ValueError, subprocess.TimeoutExpired) as e:
            notes.append("extras: rootfs build failed: %s" % str(e).splitlines()[0][:300])
    return ex


def want_extras(a):
    return want_section(a, "extras")


def want_section(a, key):
    return not a.only or key in [k.strip() for k in a.only.split(",")]


# --- the supervisor's memory ------------------------------------------------

SIZES = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_size(v):
    for unit, n in SIZES.items():
        if v.endswith(unit):
            return int(v[:-len(unit)]) * n
    return int(v)


def flood_code(n, both):
    """A program writing n bytes to stdout (and stderr) in 1 MiB writes."""
    return ("import sys\nb = b'x' * (1 << 20)\nn = %d\n"
            "while n > 0:\n    k = min(n, len(b))\n    sys.stdout.buffer.write(b[:k])\n%s    n -= k\n") % (
        n, "    sys.stderr.buffer.write(b[:k])\n" if both else "")


def peak_rss(cmd, env):
    """(exit code, peak RSS KiB of the process, how). Through GNU time when
    installed: its wait4() from a small parent is exact (and counts the
    reaped program, a max, not a sum); else VmHWM sampled every ms."""
    with tempfile.NamedTemporaryFile("r") as f, open(os.devnull, "wb") as null:
        if os.access(TIME, os.X_OK):
            p = subprocess.run([TIME, "-f", "%M", "-o", f.name] + cmd, env=env, stdin=subprocess.DEVNULL,
                               stdout=null, stderr=null, timeout=300)
            return p.returncode, int(f.read().split()[-1]), "ru_maxrss"
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    hwm = 0
    while p.poll() is None:
        try:
            with open("/proc/%d/status" % p.pid) as st:
                for line in st:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        time.sleep(0.001)
    return p.returncode, hwm, "VmHWM"


def supervisor_memory(a, nsbox, tmp):
    """The supervisor's peak RSS for a program writing 1 MiB past the cap,
    per cap, mode (plain, --json) and streams (stdout, both)."""
    rows = []
    for c in [x.strip() for x in a.supmem_caps.split(",") if x.strip()]:
        cap = parse_size(c)
        policy = os.path.join(tmp, "supmem-%s.toml" % c)
        with open(policy, "w") as f:
            f.write('extends = "default"\n[limits]\noutput_limit = "%s"\n' % c)
        for mode in ("plain", "json"):
            for both in (False, True):
                cmd = [nsbox, "run", "--policy", policy] + (["--json"] if mode == "json" else []) + \
                    ["-c", flood_code(cap + (1 << 20), both)]
                rc, kib, how = peak_rss(cmd, dict(os.environ))
                row = {"cap": c, "cap_bytes": cap, "mode": mode, "streams": "both" if both else "stdout",
                       "exit": rc, "peak_kib": kib, "how": how}
                print("bench:   cap %s %s %s: exit %d, peak %.1f MiB (%s)" % (
                    c, mode, row["streams"], rc, kib / 1024, how), file=sys.stderr, flush=True)
                rows.append(row)
    return rows


# --- timeouts under contention -----------------------------------------------

TIMEOUT_CODE = "while True: pass"
SPIN_MAX_S = 300
SPIN_CODE = "import time\nend = time.monotonic() + %d\nwhile time.monotonic() < end: pass" % SPIN_MAX_S


def kill_lateness(res):
    """How late the program ended after its deadline, in ms, from
    --trace-phases: the wall clock is armed right after the "audit row"
    phase, and the phases after it up to "program" (the init's last steps,
    ready, exec, the program) run back to back until the init is reaped."""
    names = [p["name"] for p in res.get("phases") or []]
    if res["status"] != "timeout" or "audit row" not in names or "program" not in names:
        return None
    i, j = names.index("audit row"), names.index("program")
    return sum(p["ms"] for p in res["phases"][i + 1:j + 1]) - res["limits"]["timeout_ms"]


def dist(xs):
    xs = sorted(xs)
    if not xs:
        return None
    return {"n": len(xs), "median": statistics.median(xs), "p90": xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)],
            "max": xs[-1], "min": xs[0]}


def timeouts(a, nsbox):
    """--timeout 1s busy loops, P at a time, next to CPU spinners."""
    import concurrent.futures
    cmd = [nsbox, "run", "--json", "--trace-phases", "--policy", "default", "--timeout", "1s", "-c", TIMEOUT_CODE]

    def one(_):
        t0 = time.perf_counter_ns()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        wall = (time.perf_counter_ns() - t0) / 1e6
        res = json.loads(r.stdout)
        return res, wall

    out = []
    # Each spinner ends by itself after SPIN_MAX_S even if this harness
    # dies, and is killed directly (a wrapper such as timeout(1) killed
    # with SIGKILL would leave its child spinning).
    spinners = [subprocess.Popen([PY, "-c", SPIN_CODE]) for _ in range(a.timeout_spinners)]
    try:
        time.sleep(0.5)
        for par in [int(x) for x in a.timeout_parallel.split(",") if x.strip()]:
            n = max(2 * par, 8)
            with concurrent.futures.ThreadPoolExecutor(par) as ex:
                got = list(ex.map(one, range(n)))
            statuses = {}
            for res, _ in got:
                statuses[res["status"]] = statuses.get(res["status"], 0) + 1
            row = {"parallel": par, "runs": n, "spinners": a.timeout_spinners, "statuses": statuses,
                   "duration_over_ms": dist([r["duration_ms"] - r["limits"]["timeout_ms"] for r, _ in got]),
                   "kill_late_ms": dist([x for x in (kill_lateness(r) for r, _ in got) if x is not None]),
                   "wall_over_ms": dist([w - r["limits"]["timeout_ms"] for r, w in got]),
                   "samples": [{"duration_ms": r["duration_ms"], "wall_ms": round(w, 1), "kill_late_ms": kill_lateness(r),
                                "status": r["status"]} for r, w in got]}
            d, k = row["duration_over_ms"], row["kill_late_ms"] or {"median": math.nan, "max": math.nan}
            print("bench:   %d at a time: duration-timeout median %.0f max %.0f ms; kill late median %.0f max %.0f ms; %s" % (
                par, d["median"], d["max"], k["median"], k["max"], statuses), file=sys.stderr, flush=True)
            out.append(row)
    finally:
        for sp in spinners:
            sp.kill()
            sp.wait()
    return out


# --- machine ---------------------------------------------------------------

def output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError as e:
        return "unavailable: %s" % e


def machine(nsbox):
    cpu = platform.processor()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = "%.1f GiB" % (int(line.split()[1]) / 1024 / 1024)
    osname = ""
    try:
        with open("/etc/os-release") as f:
            osname = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l).get("PRETTY_NAME", "").strip('"')
    except OSError:
        pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(), "memory": mem, "os": osname,
        "nsbox_version": output([nsbox, "--version"]), "python": output([PY, "--version"]),
        "bwrap": output(["bwrap", "--version"]) if shutil.which("bwrap") else None,
        "runc": (output([which("runc"), "--version"]).splitlines() or [None])[0] if which("runc") else None,
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


# --- report ----------------------------------------------------------------

def fmt(x, d=1):
    return "-" if x is None else ("%.*f" % (d, x))


def markdown(res, a):
    mc = res["machine"]
    L = ["# Benchmarks", "",
         "Cold-start cost of `nsbox run`, layer by layer, against bare Python, bubblewrap and runc, and",
         "the other measured figures of nsbox: sizes, where a run's time goes, root checks and builds.",
         "This is the only page with measured numbers; the others link here. It is written by `make bench`",
         "(`bench/bench.py`); do not edit it by hand. The raw samples are in `bench/results/bench.json`.", "",
         "## Machine", "",
         "| | |", "|---|---|",
         "| CPU | %s |" % mc["cpu"], "| Cores | %s |" % mc["cores"], "| Memory | %s |" % mc["memory"],
         "| Kernel | %s |" % mc["kernel"], "| OS | %s |" % mc["os"], "| Python | %s |" % mc["python"],
         "| nsbox | %s |" % mc["nsbox_version"], "| bubblewrap | %s |" % (mc["bwrap"] or "missing"),
         "| runc | %s |" % (mc["runc"] or "missing"), "| Date | %s |" % mc["date"],
         "| Load average at start | %s |" % " ".join(mc["loadavg_start"]), "",
         "## Method", "",
         "Each method M runs interleaved, run by run, with its baseline B (M B M B ...), after %d warm-up"
         % a.warmups,
         "pairs. B is bare `/usr/bin/python3.11 -c <same code>`; for the `pandas` workload B is",
         "`bench/.venv-datasci/bin/python` (the same locked wheels as the datasci root) with the environment",
         "nsbox gives the program (`PYTHONDONTWRITEBYTECODE=1`, the policy's `[env]`, `*_NUM_THREADS=1`).",
         "", "- **median / p95**: wall time of M from fork to reaped exit, ms (p95 by nearest rank).",
         "- **ratio**: median of the per-pair ratios M_i / B_i. **+ms**: median of the per-pair differences M_i - B_i.",
         "- **runs/s**: sequential cold runs per second, 1000 / mean wall ms.",
         "- **maxrss**: `ru_maxrss` from `wait4()` on the process started, taken through GNU `/usr/bin/time -f %M`",
         "  (largest of %d extra runs; from this harness directly it would include the harness's own RSS," % a.rss_runs,
         "  which fork + exec carry over). For nsbox the kernel folds in the children the supervisor reaped,",
         "  so it is max(supervisor, init, python).",
         "  **sup. HWM**: VmHWM of the nsbox process itself, sampled from `/proc/PID/status` every ms during",
         "  %d separate runs (the supervisor alone; a lower bound)." % a.rss_runs,
         "- **load**: the host's 1-minute load average when the method started. Above the core count",
         "  (%d here) the host was busy with other work and every figure is inflated; the paired ratio and +ms" % mc["cores"],
         "  cancel slow drift, not contention inside a run.",
         "- Layer rows use policies derived from `policies/default.toml` with one change each (written to a",
         "  temp dir by the harness); *layer cost* = +ms(default) - +ms(layer off), i.e. what the layer adds.",
         ""]
    for wl in ("pass", "stdlib", "prog200", "pandas", "download", "download20"):
        rows = [m for m in res["methods"] if m["workload"] == wl]
        if not rows:
            continue
        title = {"pass": "`-c pass`", "stdlib": "`-c '%s'`" % STDLIB_CODE, "pandas": "`-c '%s'`" % PANDAS_CODE,
                 "prog200": "a %d-line program (`prog200()` in bench/bench.py: classes, comprehensions, f-strings)"
                 % len(prog200().splitlines()),
                 **netbench.TITLES}[wl]
        L += ["## Workload %s" % title, "",
              "| Method | n | median ms | p95 ms | ratio | +ms | B median ms | runs/s | maxrss MiB | sup. HWM MiB | load | note |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for m in rows:
            r = m["result"]
            if r is None:
                L.append("| %s | - | failed: %s ||||||||||" % (m["name"], m["error"].splitlines()[0][:120]))
                continue
            L.append("| %s | %d | %s | %s | %s× | %s | %s | %s | %s | %s | %.1f | %s |" % (
                m["name"], r["n"], fmt(r["median_ms"]), fmt(r["p95_ms"]), fmt(r["ratio_median"], 2),
                fmt(r["overhead_ms_median"]), fmt(r["base_median_ms"]), fmt(r["runs_per_s"]),
                fmt(m["maxrss_kib"] / 1024 if m.get("maxrss_kib") else None), fmt(m["sup_hwm_kib"] / 1024 if m.get("sup_hwm_kib") else None),
                m["loadavg_1m_at_start"], m["note"]))
        L.append("")
    lc = res.get("layer_costs") or {}
    if lc:
        L += ["## Cost of each layer (`-c pass`)", "",
              "Positive: the layer adds that much to a run. From the medians of the per-pair differences above.", "",
              "| Layer | cost ms | how |", "|---|---:|---|"]
        for k, v in lc.items():
            L.append("| %s | %s | %s |" % (k, fmt(v["ms"]), v["how"]))
        L.append("")
    L += markdown_extras(res.get("extras"))
    L += markdown_supervisor(res.get("supervisor_memory"), res.get("timeouts"))
    L += servicebench.markdown(res.get("service"))
    L += rootbench.markdown(res.get("roots"))
    findings = os.path.join(HERE, "findings.md")
    if os.path.exists(findings):  # hand-written reading of a run; kept across reruns
        with open(findings) as f:
            L += [f.read().rstrip("\n"), ""]
    if res["notes"]:
        L += ["## Notes", ""] + ["- " + n for n in res["notes"]] + [""]
    L += ["## Reproduce", "",
          "As root on Debian 12, from the repository root, after `make build` and (for the datasci and pandas",
          "rows) `make datasci` and `make datasci-venv`:", "", "```", "make bench",
          "make bench BENCH_ARGS=\"--runs 50 --only 'nsbox default'\"   # a subset, more runs",
          "```", "",
          "`make bench` builds `bin/nsbox` and runs `python3 bench/bench.py`. As root it installs `bubblewrap`",
          "and `runc` with apt-get when they are missing (`--no-install` to skip; their rows are then skipped).",
          "Knobs: `--runs` (`BENCH_RUNS`, default 30, at least 30), `--pandas-runs`, `--warmups`, `--rss-runs`,",
          "`--only`, `--json-out`, `--md-out` (see `python3 bench/bench.py --help`). A full run takes about",
          "%d s on this machine. The figures move with host load: compare ratios and +ms, which are paired," % res["elapsed_s"],
          "rather than medians taken at different times.", ""]
    return "\n".join(L)


def mib(b, d=1):
    return "-" if b is None else "%.*f MiB" % (d, b / 1048576)


def kib(b):
    return "-" if b is None else "%.1f KiB" % (b / 1024)


def markdown_extras(ex):
    """The sizes, phases and root sections; none for results without them."""
    if not ex:
        return []
    L = []
    sz = ex.get("sizes") or {}
    if sz:
        L += ["## Sizes", "",
              "| What | Size |", "|---|---:|",
              "| `bin/nsbox` (static, with cgo) | %s |" % mib(sz.get("nsbox")),
              "| `bin/nsbox-init` (the stand-alone init, without cgo) | %s |" % mib(sz.get("nsbox_init")),
              "| the Python runner's source (`sandbox/pyrunner/runner.py`) | %s |" % kib(sz.get("runner_source")),
              "| the Python runner compiled into `base` (`/usr/lib/nsbox/runner-HASH.pyc`) | %s |" % kib(sz.get("runner_compiled")),
              ""]
        if sz.get("roots"):
            L += ["| Root | regular files | paths | size of the files | `manifest.json` | `root.json` | critical entries | packages |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
            for name, r in sz["roots"].items():
                L.append("| `%s` | %d | %d | %s | %s | %s | %d | %d |" % (
                    name, r["files"], r["paths"], mib(r["bytes"]), kib(r["manifest_bytes"]), kib(r["header_bytes"]),
                    r["critical"], r["packages"]))
            L.append("")
    ph = ex.get("phases") or []
    if ph:
        pols = [p["policy"] for p in ph]
        L += ["## Where a run's time goes", "",
              "Median of each phase of `nsbox run --json --trace-phases --policy P -c pass` over %s runs, in ms"
              % "/".join(str(p["runs"]) for p in ph),
              "(the phases are described with the result's `phases` field in [result-schema.md](result-schema.md)).",
              "`init: ...` phases are the init's own steps, timed inside the sandbox. `duration_ms` covers the",
              "supervisor's phases; the harness's wall time also covers the process's start and exit.", "",
              "| Phase | " + " | ".join("`%s` ms" % p for p in pols) + " |",
              "|---|" + "---:|" * len(pols)]
        names = []
        for p in ph:
            for x in p["phases"]:
                if x["name"] not in names:
                    names.append(x["name"])
        for n in names:
            cells = []
            for p in ph:
                v = next((x["median_ms"] for x in p["phases"] if x["name"] == n), None)
                cells.append(fmt(v, 2))
            L.append("| %s | %s |" % (n, " | ".join(cells)))
        L.append("| **`duration_ms`** | %s |" % " | ".join(fmt(p["duration_ms_median"]) for p in ph))
        L.append("| **wall, seen by the harness** | %s |" % " | ".join(fmt(p["wall_ms_median"]) for p in ph))
        L.append("")
    ve, bb = ex.get("verify") or {}, ex.get("build_base")
    if ve or bb:
        L += ["## Roots: full check and build", "",
              "The quick check of every run is the `rootfs` phase above. The full check (`verify = \"full\"`,",
              "`nsbox rootfs verify`) re-hashes every file of the root.", "",
              "| What | median | runs |", "|---|---:|---:|"]
        for name, v in ve.items():
            L.append("| `nsbox rootfs verify` on `%s` | %s ms | %d |" % (name, fmt(v["median_ms"]), v["runs"]))
        if bb:
            L.append("| `nsbox rootfs build` of `base` into a scratch directory (%d files, %s; no network) | %s s | %d |" % (
                bb["files"], mib(bb["bytes"]), fmt(bb["elapsed_ms_median"] / 1000), bb["runs"]))
        L.append("")
    return L


def markdown_supervisor(mem, tos):
    """The supervisor-memory and timeouts sections; none for results
    without them."""
    L = []
    if mem:
        caps = []
        for r in mem:
            if r["cap"] not in caps:
                caps.append(r["cap"])
        by = {(r["cap"], r["mode"], r["streams"]): r for r in mem}
        L += ["## The supervisor's memory", "",
              "Peak RSS of the nsbox process (it runs outside the run's cgroup) for a program that writes 1 MiB",
              "past the output cap, to stdout or to both streams, one run each (`%s` from a small parent:" % mem[0]["how"],
              "the program it reaped is counted as a max, not a sum). Plain mode passes the output through and",
              "keeps a 1 KiB head; `--json` holds the output once, up to the cap per stream.", "",
              "| Cap | plain, stdout | plain, both | `--json`, stdout | `--json`, both |", "|---|---:|---:|---:|---:|"]
        for c in caps:
            cells = []
            for mode in ("plain", "json"):
                for st in ("stdout", "both"):
                    r = by.get((c, mode, st))
                    cells.append("-" if r is None else "%.1f MiB" % (r["peak_kib"] / 1024))
            L.append("| %s | %s |" % (c, " | ".join(cells)))
        L.append("")
    if tos:
        L += ["## Timeouts under contention", "",
              "`nsbox run --json --trace-phases --timeout 1s -c '%s'`, P runs at a time, with %d CPU spinners" % (
                  TIMEOUT_CODE, tos[0]["spinners"]),
              "beside them on this machine's cores. *kill late*: the program's end (its init reaped, every",
              "process of the run gone) minus its deadline, from the phases. *duration - timeout*: `duration_ms`",
              "(the supervisor's whole run, setup and cleanup included) minus the timeout. *wall - timeout*: the",
              "harness's clock around the whole command. In ms: median / p90 / max.", "",
              "| P | runs | kill late | duration - timeout | wall - timeout | statuses |", "|---:|---:|---|---|---|---|"]
        for r in tos:
            def d3(d):
                return "-" if not d else "%.0f / %.0f / %.0f" % (d["median"], d["p90"], d["max"])
            L.append("| %d | %d | %s | %s | %s | %s |" % (
                r["parallel"], r["runs"], d3(r["kill_late_ms"]), d3(r["duration_over_ms"]), d3(r["wall_over_ms"]),
                ", ".join("%s %d" % kv for kv in sorted(r["statuses"].items()))))
        L.append("")
    return L


def layer_costs(methods):
    by = {(m["name"], m["workload"]): m["result"] for m in methods if m["result"]}

    def ohw(name, workload):
        r = by.get((name, workload))
        return None if r is None else r["overhead_ms_median"]

    def oh(name):
        return ohw(name, "pass")
    ref = oh("nsbox default")
    out = {}
    if ref is None:
        return out
    for name, layer, how in (
            ("nsbox default, seccomp off", "seccomp (default profile)", "default - seccomp off"),
            ("nsbox default, landlock off", "landlock", "default - landlock off"),
            ("nsbox default, Python layer off", "Python policy layer (default allowlist)", "default - Python layer off"),
            ("nsbox default, audit on tmpfs", "audit DB on disk instead of tmpfs", "default - audit on tmpfs")):
        x = oh(name)
        if x is not None:
            out[layer] = {"ms": ref - x, "how": how}
    x = oh("nsbox default, verify full")
    if x is not None:
        out['rootfs verify "full" instead of "quick"'] = {"ms": x - ref, "how": "verify full - default"}
    p, w, wn = oh("nsbox permissive"), oh("unshare+tmpfs cgroup wrapper, bare python3.11"), \
        oh("unshare+tmpfs cgroup wrapper, nsbox permissive")
    if None not in (p, w, wn):
        out["cgroups (create, limit, remove)"] = {"ms": p - (wn - w),
                                                   "how": "permissive - (wrapped permissive - wrapped bare python)"}
    s = oh("nsbox strict")
    if s is not None:
        out["strict instead of default (policy as a whole)"] = {"ms": s - ref, "how": "strict - default"}
    for wl, what in (("pass", "`-c pass`"), ("prog200", "the 200-line program")):
        r, g = ohw("nsbox strict", wl), ohw("nsbox strict, guarded mode", wl)
        if None not in (r, g):
            out["strict's restricted mode (RestrictedPython) instead of guarded, " + what] = {
                "ms": r - g, "how": "strict - strict guarded (%s)" % wl}
    out.update(netbench.costs(oh, ohw))
    return out


def main():
    a = parse_args()
    if a.render:
        with open(rp(a.render)) as f:
            res = json.load(f)
        a.warmups, a.rss_runs = res["config"]["warmups"], res["config"]["rss_runs"]
        with open(rp(a.md_out), "w") as f:
            f.write(markdown(res, a))
        return
    if a.runs < 30:
        sys.exit("bench: --runs must be at least 30")
    if os.geteuid() != 0:
        sys.exit("bench: run as root (nsbox needs root)")
    nsbox = rp(a.nsbox)
    if not os.access(nsbox, os.X_OK):
        sys.exit("bench: no nsbox binary at %s (make build)" % nsbox)
    t_start = time.monotonic()
    notes = []
    a.bwrap, a.runc = ensure_tools(a.no_install, notes)
    tmp = tempfile.mkdtemp(prefix="nsbox-bench-")
    res = {"schema": 1, "machine": machine(nsbox), "notes": notes,
           "config": {"runs": a.runs, "pandas_runs": a.pandas_runs, "warmups": a.warmups, "rss_runs": a.rss_runs,
                      "phase_runs": a.phase_runs, "verify_runs": a.verify_runs, "build_runs": a.build_runs,
                      "supmem_caps": a.supmem_caps, "timeout_parallel": a.timeout_parallel,
                      "timeout_spinners": a.timeout_spinners,
                      "order": "M B M B ... (M first in every pair)"}}
    try:
        if want_extras(a):
            res["extras"] = extras(a, nsbox, tmp, notes)
        if want_section(a, "supervisor-memory"):
            print("bench: [supervisor memory] caps %s" % a.supmem_caps, file=sys.stderr, flush=True)
            try:
                res["supervisor_memory"] = supervisor_memory(a, nsbox, tmp)
            except (OSError, ValueError, subprocess.TimeoutExpired) as e:
                notes.append("supervisor memory failed: %s" % str(e)[:300])
        if want_section(a, "timeouts"):
            print("bench: [timeouts] %s at a time, %d spinners" % (a.timeout_parallel, a.timeout_spinners),
                  file=sys.stderr, flush=True)
            try:
                res["timeouts"] = timeouts(a, nsbox)
            except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
                notes.append("timeouts failed: %s" % str(e)[:300])
        if want_section(a, "roots"):
            res["roots"] = rootbench.measure(nsbox, tmp, a.lock_runs, a.layer_runs, notes)
        if want_section(a, "service"):
            print("bench: [service] nsbox serve on a Unix socket", file=sys.stderr, flush=True)
            venv_py = os.path.join(rp(a.venv), "bin", "python")
            have_datasci = os.path.isdir(os.path.join(ROOTS, "datasci"))
            venv_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **policy_env("datasci"))
            res["service"] = servicebench.service_figures(
                a, nsbox, tmp, notes, PY, venv_py if os.path.exists(venv_py) else None, venv_env, have_datasci)
        meths = build_methods(a, tmp, notes)
        for i, m in enumerate(meths):
            print("bench: [%d/%d] %s (%s), %d pairs" % (i + 1, len(meths), m["name"], m["workload"], m["runs"]),
                  file=sys.stderr, flush=True)
            m["result"], m["error"], m["sup_hwm_kib"], m["maxrss_kib"] = None, None, None, None
            m["loadavg"] = float(open("/proc/loadavg").read().split()[0])
            try:
                m["result"] = measure(m, m["base"], m["runs"], a.warmups)
                m["maxrss_kib"] = rss_pass(m, a.rss_runs)
                if m["nsbox"] and a.rss_runs > 0:
                    hw = [run_once(list(m["cmd"]), m["env"], sample_hwm=True)[2] for _ in range(a.rss_runs)]
                    hw = [h for h in hw if h]
                    m["sup_hwm_kib"] = max(hw) if hw else None
                if m["result"]["retried_failures"]:
                    notes.append("%s (%s): %d run(s) failed and were retried once; first: %s" % (
                        m["name"], m["workload"], len(m["result"]["retried_failures"]),
                        m["result"]["retried_failures"][0].replace("\n", " ")[:200]))
                r = m["result"]
                print("bench:   median %.1f ms  p95 %.1f  ratio %.2f  +%.1f ms  maxrss %s KiB  sup. HWM %s KiB" % (
                    r["median_ms"], r["p95_ms"], r["ratio_median"], r["overhead_ms_median"], m["maxrss_kib"],
                    m["sup_hwm_kib"]),
                    file=sys.stderr, flush=True)
            except RunError as e:
                m["error"] = str(e)
                notes.append("%s (%s) failed: %s" % (m["name"], m["workload"], str(e).splitlines()[0][:300]))
                print("bench:   FAILED: %s" % e, file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree("/dev/shm/nsbox-bench-%d" % os.getpid(), ignore_errors=True)
    res["methods"] = [{"name": m["name"], "layer": m["layer"], "workload": m["workload"], "note": m["note"],
                       "cmd": [str(x) for x in list(m["cmd"])], "baseline_cmd": m["base"]["cmd"],
                       "result": m["result"], "error": m["error"], "sup_hwm_kib": m["sup_hwm_kib"],
                       "maxrss_kib": m["maxrss_kib"], "loadavg_1m_at_start": m["loadavg"]} for m in meths]
    busy = [m for m in res["methods"] if m["loadavg_1m_at_start"] > (res["machine"]["cores"] or 1)]
    if busy:
        res["notes"].insert(0, "The host was busy during %d of %d methods (1-minute load average above %d "
                            "cores, up to %.1f): the 1-minute average lags (it includes "
                            "work that ended before the method started), so judge quiet by the B median of bare python; "
                            "on a busy host rerun `make bench` before checking targets." % (
                                len(busy), len(res["methods"]), res["machine"]["cores"],
                                max(m["loadavg_1m_at_start"] for m in busy)))
    res["layer_costs"] = layer_costs(res["methods"])
    res["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    res["elapsed_s"] = round(time.monotonic() - t_start)
    for path, text in ((rp(a.json_out), json.dumps(res, indent=1) + "\n"), (rp(a.md_out), markdown(res, a))):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    print(markdown(res, a))
    print("bench: wrote %s and %s in %d s" % (a.json_out, a.md_out, res["elapsed_s"]), file=sys.stderr)


if __name__ == "__main__":
    main()
