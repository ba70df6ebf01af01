"""The service's figures for bench.py (section "service"): nsbox serve on a
Unix socket, driven from this process as a client would drive it.

- one-shot print(1) through POST /v1/runs, each run taking a pooled
  sandbox (the harness waits for the pool to refill between runs),
  interleaved with bare `python3.11 -c 'print(1)'`;
- a pandas snippet through the datasci pool against the same snippet
  exec'd in an already-running bare interpreter (the datasci venv's, with
  pandas imported once before timing);
- a datasci session's `df.describe()` cell on a 1,000-row DataFrame
  (p50, p99), when the service has sessions;
- sustained one-shot runs/s with 8 concurrent clients;
- the pool's refill rate (sandboxes/s, per policy, from empty);
- the service's own RSS with 0, 10 and 50 idle sessions.

Every figure is reported, met or not; a part that fails is noted.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

PRINT1 = "print(1)"
PANDAS_SNIPPET = "import pandas as pd\ndf = pd.DataFrame({'x': range(1000)})\nprint(int(df.x.sum()))"
DESCRIBE_SETUP = ("import pandas as pd\n"
                  "df = pd.DataFrame({'x': range(1000), 'y': [i * i for i in range(1000)]})")
DESCRIBE = "df.describe()"
SETTLE_S = 0.05
REFILL_SIZE = 4


class UnixHTTP(http.client.HTTPConnection):
    """HTTP/1.1 with keep-alive over a Unix socket."""

    def __init__(self, path, timeout=120):
        super().__init__("nsbox", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


class Client:
    def __init__(self, sock):
        self.sock = sock
        self.c = UnixHTTP(sock)

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        hdr = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            try:
                self.c.request(method, path, body=data, headers=hdr)
                r = self.c.getresponse()
                return r.status, r.read()
            except (ConnectionError, http.client.HTTPException):
                self.c.close()
                self.c = UnixHTTP(self.sock)
                if attempt:
                    raise

    def run(self, code, policy):
        st, b = self.call("POST", "/v1/runs", {"code": code, "policy": policy})
        if st != 200:
            raise RuntimeError("POST /v1/runs: %d %s" % (st, b[:300]))
        return json.loads(b)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))]


def summary(xs):
    return {"n": len(xs), "median": statistics.median(xs), "p99": pct(xs, 99), "min": min(xs), "max": max(xs)}


class Service:
    """nsbox serve in a fresh state directory."""

    def __init__(self, nsbox, tmp, pool, policies):
        self.state = os.path.join(tmp, "serve-state-%d" % pool)
        os.makedirs(self.state, exist_ok=True)
        self.sock = os.path.join(self.state, "nsbox.sock")
        env = dict(os.environ, NSBOX_STATE_DIR=self.state)
        self.log = open(os.path.join(tmp, "serve-%d.log" % pool), "w")
        self.p = subprocess.Popen([nsbox, "serve", "--listen", "unix:" + self.sock, "--pool", str(pool),
                                   "--policies", ",".join(policies), "--max-concurrent-runs", "8", "--max-sessions", "64",
                                   "--audit-db", os.path.join(self.state, "audit.db")],
                                  env=env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while True:
            if self.p.poll() is not None:
                raise RuntimeError("nsbox serve exited %d: %s" % (self.p.returncode, self.logtext()))
            try:
                if Client(self.sock).call("GET", "/v1/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("nsbox serve did not answer within 60 s")
            time.sleep(0.02)

    def logtext(self):
        with open(self.log.name) as f:
            return f.read()[-2000:]

    def waiting(self):
        """Ids of the sandboxes waiting in the pools (their run dirs)."""
        try:
            return {n for n in os.listdir(os.path.join(self.state, "runs")) if not n.startswith(".")}
        except FileNotFoundError:
            return set()

    def pool_waiting(self, policy):
        """nsbox_pool_waiting{policy=...} from /v1/metrics: run-mode
        sandboxes ready in the policy's pool."""
        st, b = Client(self.sock).call("GET", "/v1/metrics")
        if st != 200:
            raise RuntimeError("GET /v1/metrics: %d" % st)
        key = 'nsbox_pool_waiting{policy="%s"} ' % policy
        for line in b.decode().splitlines():
            if line.startswith(key):
                return int(line[len(key):])
        return 0

    def wait_pool(self, n, limit=120, policy="strict"):
        deadline = time.monotonic() + limit
        while self.pool_waiting(policy) < n:
            if time.monotonic() > deadline:
                raise RuntimeError("pool not refilled to %d within %d s" % (n, limit))
            time.sleep(0.005)

    def rss_kib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        shutil.rmtree(self.state, ignore_errors=True)


def bare(cmd):
    t0 = time.perf_counter_ns()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter_ns() - t0) / 1e6


def oneshot(svc, py, runs, warmups, log):
    """print(1) through the pool against bare python -c 'print(1)'."""
    c = Client(svc.sock)
    m, b, pooled = [], [], 0
    for i in range(warmups + runs):
        svc.wait_pool(2)
        time.sleep(SETTLE_S)
        before = svc.waiting()
        t0 = time.perf_counter_ns()
        r = c.run(PRINT1, "strict")
        ms = (time.perf_counter_ns() - t0) / 1e6
        if r["status"] != "ok":
            raise RuntimeError("print(1): %s" % json.dumps(r)[:300])
        bm = bare([py, "-c", PRINT1])
        if i >= warmups:
            m.append(ms)
            b.append(bm)
            pooled += r["id"] in before
    res = {"service": summary(m), "bare": summary(b), "pooled": pooled, "ratio_median": statistics.median(m) / statistics.median(b),
           "target": "<= 0.3x bare"}
    res["met"] = res["ratio_median"] <= 0.3
    log("one-shot print(1): service median %.1f ms, bare %.1f ms, ratio %.2f (target <= 0.3), %d/%d pooled" % (
        res["service"]["median"], res["bare"]["median"], res["ratio_median"], pooled, runs))
    return res


class Warm:
    """A bare interpreter kept running: exec's each snippet it is sent and
    answers when done."""
    LOOP = ("import sys, io, contextlib\n"
            "for line in sys.stdin:\n"
            "    n = int(line)\n"
            "    src = sys.stdin.read(n)\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        exec(compile(src, '<snippet>', 'exec'), {})\n"
            "    sys.stdout.write('done\\n'); sys.stdout.flush()\n")

    def __init__(self, py, env):
        self.p = subprocess.Popen([py, "-c", self.LOOP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                  text=True)

    def run(self, src):
        t0 = time.perf_counter_ns()
        self.p.stdin.write("%d\n%s" % (len(src), src))
        self.p.stdin.flush()
        if self.p.stdout.readline() != "done\n":
            raise RuntimeError("the bare interpreter failed")
        return (time.perf_counter_ns() - t0) / 1e6

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def pandas_pooled(svc, venv_py, env, runs, warmups, log):
    c = Client(svc.sock)
    w = Warm(venv_py, env)
    try:
        w.run("import pandas")  # imported once: "already running"
        m, b, pooled = [], [], 0
        for i in range(warmups + runs):
            # A pooled sandbox counts once its runner is ready (preload
            # imported); the short settle lets the previous run's
            # teardown, done after its answer, end too.
            svc.wait_pool(1, 300, "datasci")
            time.sleep(SETTLE_S)
            before = svc.waiting()
            t0 = time.perf_counter_ns()
            r = c.run(PANDAS_SNIPPET, "datasci")
            ms = (time.perf_counter_ns() - t0) / 1e6
            if r["status"] != "ok":
                raise RuntimeError("pandas snippet: %s" % json.dumps(r)[:300])
            bm = w.run(PANDAS_SNIPPET)
            if i >= warmups:
                m.append(ms)
                b.append(bm)
                pooled += r["id"] in before
    finally:
        w.close()
    mb = statistics.median(b)
    res = {"service": summary(m), "bare_running": summary(b), "pooled": pooled,
           "target_ms": 1.1 * mb + 5, "target": "<= 1.1x the running interpreter + 5 ms"}
    res["met"] = statistics.median(m) <= res["target_ms"]
    log("pandas snippet: pooled median %.1f ms, running bare %.2f ms (target <= %.1f ms), %d/%d pooled" % (
        res["service"]["median"], mb, res["target_ms"], pooled, runs))
    return res


def has_sessions(c):
    st, _ = c.call("GET", "/v1/sessions")
    return st == 200


def open_session(c, policy):
    st, b = c.call("POST", "/v1/sessions", {"policy": policy})
    if st not in (200, 201):
        raise RuntimeError("POST /v1/sessions: %d %s" % (st, b[:300]))
    return json.loads(b)["id"]


def cell(c, sid, code):
    st, b = c.call("POST", "/v1/sessions/%s/cells" % sid, {"code": code})
    if st != 200:
        raise RuntimeError("cell: %d %s" % (st, b[:300]))
    r = json.loads(b)
    if r["status"] != "ok":
        raise RuntimeError("cell %r: %s" % (code, json.dumps(r)[:300]))
    return r


def describe_cells(svc, runs, warmups, log):
    c = Client(svc.sock)
    if not has_sessions(c):
        return None
    sid = open_session(c, "datasci")
    try:
        cell(c, sid, DESCRIBE_SETUP)
        xs = []
        for i in range(warmups + runs):
            t0 = time.perf_counter_ns()
            cell(c, sid, DESCRIBE)
            if i >= warmups:
                xs.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        c.call("DELETE", "/v1/sessions/%s" % sid)
    res = {"cell": summary(xs), "target": "p50 <= 10 ms, p99 <= 25 ms"}
    res["met"] = res["cell"]["median"] <= 10 and res["cell"]["p99"] <= 25
    log("session df.describe(): p50 %.1f ms, p99 %.1f ms (targets 10, 25)" % (res["cell"]["median"], res["cell"]["p99"]))
    return res


def sustained(svc, seconds, clients, log):
    done = time.monotonic() + seconds
    counts, errors, lat = [0] * clients, [], []
    lock = threading.Lock()

    def worker(k):
        c = Client(svc.sock)
        while time.monotonic() < done:
            t0 = time.perf_counter_ns()
            try:
                r = c.run(PRINT1, "strict")
            except (OSError, RuntimeError) as e:
                errors.append(str(e)[:200])
                continue
            if r["status"] == "ok":
                counts[k] += 1
                with lock:
                    lat.append((time.perf_counter_ns() - t0) / 1e6)
    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    el = time.monotonic() - t0
    res = {"clients": clients, "seconds": round(el, 1), "runs": sum(counts), "runs_per_s": sum(counts) / el,
           "latency": summary(lat) if lat else None, "errors": len(errors), "first_error": errors[0] if errors else None}
    log("sustained: %.1f runs/s with %d clients over %.0f s (%d errors)" % (res["runs_per_s"], clients, el, len(errors)))
    return res


def refill(nsbox, tmp, policy, log):
    """A fresh service with one policy and --pool REFILL_SIZE: from its
    first answer to REFILL_SIZE run-mode sandboxes ready (the runner's
    ready line: preload imported; the session pool fills beside it)."""
    svc = Service(nsbox, tmp, REFILL_SIZE, [policy])
    try:
        t0 = time.monotonic()
        svc.wait_pool(REFILL_SIZE, 300, policy)
        el = time.monotonic() - t0
    finally:
        svc.stop()
    log("refill %s: %d sandboxes in %.2f s (%.1f/s)" % (policy, REFILL_SIZE, el, REFILL_SIZE / el))
    return {"policy": policy, "sandboxes": REFILL_SIZE, "seconds": el, "per_s": REFILL_SIZE / el}


def idle_rss(svc, log):
    c = Client(svc.sock)
    if not has_sessions(c):
        return None
    out, ids = [], []
    try:
        for target in (0, 10, 50):
            while len(ids) < target:
                ids.append(open_session(c, "default"))
            time.sleep(1)
            out.append({"sessions": target, "rss_kib": svc.rss_kib()})
            log("service RSS with %d idle sessions: %.1f MiB" % (target, out[-1]["rss_kib"] / 1024))
    finally:
        for sid in ids:
            c.call("DELETE", "/v1/sessions/%s" % sid)
    return out


def service_figures(a, nsbox, tmp, notes, py, venv_py, venv_env, have_datasci):
    """Every figure of the section; a failing part is noted and left out."""
    def log(s):
        print("bench:   " + s, file=sys.stderr, flush=True)
    res = {}
    policies = ["strict", "default"] + (["datasci"] if have_datasci else [])
    parts = [
        ("oneshot", 2, lambda s: oneshot(s, py, a.runs, a.warmups, log)),
        ("pandas", 1, lambda s: pandas_pooled(s, venv_py, venv_env, a.pandas_runs, a.warmups, log) if have_datasci and venv_py else None),
        ("describe", 0, lambda s: describe_cells(s, max(a.runs, 100), a.warmups, log) if have_datasci else None),
        ("sustained", 2, lambda s: sustained(s, 20, 8, log)),
        ("refill", None, lambda s: [refill(nsbox, tmp, p, log) for p in policies]),
        ("idle_rss", 0, lambda s: idle_rss(s, log)),
    ]
    for name, pool, fn in parts:
        print("bench: [service] %s (--pool %s)" % (name, pool), file=sys.stderr, flush=True)
        svc = None
        try:
            if pool is not None:
                svc = Service(nsbox, tmp, pool, policies)
            res[name] = fn(svc)
        except (OSError, RuntimeError, ValueError, KeyError, subprocess.SubprocessError) as e:
            notes.append("service %s failed: %s" % (name, str(e).splitlines()[0][:300] if str(e) else repr(e)))
            log("FAILED: %s" % e)
        finally:
            if svc:
                svc.stop()
    return res


def markdown(sv):
    if not sv:
        return []

    def yn(r):
        return "met" if r.get("met") else "not met"
    L = ["## The service", "",
         "`nsbox serve` on a Unix socket in a fresh state directory, driven by a client in the harness's own",
         "process (HTTP/1.1, keep-alive). One-shot runs take a sandbox from the policy's pool (the harness",
         "waits for the pool to refill between timed runs: a sandbox counts once its runner is ready, its",
         "preload imported; *pooled* counts the runs that took one). Times in ms, end to end at the client.",
         "The refill rate counts run-mode sandboxes ready from a fresh start of a service with that policy alone.", "",
         "| Figure | Measured | Baseline | Target | |", "|---|---|---|---|---|"]
    o = sv.get("oneshot")
    if o:
        L.append("| one-shot `print(1)`, `POST /v1/runs` (%d/%d pooled) | median %.1f, p99 %.1f | bare `python3.11 -c` median %.1f | "
                 "ratio %.2f, target <= 0.3 | %s |" % (o["pooled"], o["service"]["n"], o["service"]["median"], o["service"]["p99"],
                                                         o["bare"]["median"], o["ratio_median"], yn(o)))
    p = sv.get("pandas")
    if p:
        L.append("| one-shot pandas snippet, datasci pool (%d/%d pooled) | median %.1f, p99 %.1f | running interpreter median %.2f | "
                 "<= %.1f | %s |" % (p["pooled"], p["service"]["n"], p["service"]["median"], p["service"]["p99"],
                                     p["bare_running"]["median"], p["target_ms"], yn(p)))
    d = sv.get("describe")
    if d:
        L.append("| datasci session cell `df.describe()`, 1,000 rows | p50 %.1f, p99 %.1f | - | p50 <= 10, p99 <= 25 | %s |" % (
            d["cell"]["median"], d["cell"]["p99"], yn(d)))
    s = sv.get("sustained")
    if s:
        L.append("| sustained one-shot `print(1)`, %d clients, %.0f s | %.1f runs/s (latency median %s) | - | - | |" % (
            s["clients"], s["seconds"], s["runs_per_s"], "%.1f" % s["latency"]["median"] if s["latency"] else "-"))
    for r in sv.get("refill") or []:
        L.append("| pool refill, %s, from a fresh start | %.1f sandboxes/s (%d in %.2f s) | - | - | |" % (
            r["policy"], r["per_s"], r["sandboxes"], r["seconds"]))
    for r in sv.get("idle_rss") or []:
        L.append("| the service's RSS, %d idle sessions | %.1f MiB | - | - | |" % (r["sessions"], r["rss_kib"] / 1024))
    L.append("")
    return L
