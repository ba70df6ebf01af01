"""The nsbox wheel, installed into a fresh venv, against real sandboxes.

`make python-test` builds the wheel (dist/) and the datasci root first and
runs this module as root, under the same lock as the Go integration tests.
Nothing is mocked: the venv's own nsbox binaries run every sandbox, and
the SDK code under test is the venv's installed copy, run by the venv's
Python in a child process (the snippets below), with a PATH and an
environment that name no other nsbox.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from typing import Any, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDK_PYTHON = os.environ.get("NSBOX_SDK_PYTHON", sys.executable)
DEFAULT_SOCKET = "/run/nsbox/nsbox.sock"

# Set up once for the module (setUpModule).
TMP = ""
VENV = ""
WHEEL = ""
ENV: Dict[str, str] = {}


def setUpModule() -> None:
    global TMP, VENV, WHEEL, ENV
    if os.geteuid() != 0:
        if os.environ.get("NSBOX_MUST_WORK") == "1":
            raise RuntimeError("the wheel's tests need root (nsbox runs as root)")
        raise unittest.SkipTest("needs root (nsbox runs as root)")
    wheels = glob.glob(os.path.join(REPO, "dist", "nsbox-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"want exactly one dist/nsbox-*.whl (make wheel), found {wheels}")
    WHEEL = wheels[0]
    # Readable by others (the unprivileged caller's test runs the venv's
    # Python), written by root only, as nsbox wants its binaries' directory.
    TMP = tempfile.mkdtemp(prefix="nsbox-wheel-test-")
    os.chmod(TMP, 0o755)
    VENV = os.path.join(TMP, "venv")
    # An environment that names no other nsbox: the SDK must find the
    # wheel's own binary. The roots, state and audit log stay the caller's.
    ENV = {k: v for k, v in os.environ.items() if not k.startswith("NSBOX_") or k in _KEEP}
    ENV["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    ENV["PYTHONDONTWRITEBYTECODE"] = "1"
    t0 = time.monotonic()
    subprocess.run([SDK_PYTHON, "-m", "venv", "--without-pip", VENV], check=True)
    subprocess.run(
        [
            "python3", "-m", "pip", "--python", os.path.join(VENV, "bin", "python"), "install",
            "--disable-pip-version-check", "--quiet", "--no-index", "--no-deps", WHEEL,
        ],
        check=True,
    )
    t1 = time.monotonic()
    first = py("import nsbox; r = nsbox.run('print(1)'); out(r.stdout)")
    t2 = time.monotonic()
    if first != "1\n":
        raise RuntimeError(f"first run printed {first!r}")
    sys.stderr.write(
        f"\nwheel {os.path.basename(WHEEL)}: {os.path.getsize(WHEEL)} bytes; venv and pip install "
        f"{t1 - t0:.2f} s, then the first nsbox.run {t2 - t1:.2f} s\n"
    )


_KEEP = {"NSBOX_ROOTS_DIR", "NSBOX_STATE_DIR", "NSBOX_AUDIT_DB", "NSBOX_MUST_WORK", "NSBOX_ID_RANGE"}


def tearDownModule() -> None:
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


PRELUDE = textwrap.dedent(
    """\
    import json, sys
    def out(v):
        sys.stdout.write("\\n@@" + json.dumps(v) + "\\n")
        sys.stdout.flush()
    """
)


def py(code: str, env: Optional[Dict[str, str]] = None, user: Optional[int] = None, timeout: float = 300) -> Any:
    """Runs code in the venv's Python and returns what it passed to out()."""
    e = dict(ENV)
    e.update(env or {})
    kw: Dict[str, Any] = {}
    if user is not None:
        kw["user"], kw["group"], kw["extra_groups"] = user, user, []
        e["HOME"] = "/nonexistent"
    p = subprocess.run(
        [os.path.join(VENV, "bin", "python"), "-c", PRELUDE + textwrap.dedent(code)],
        env=e,
        cwd=TMP,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )
    marks = [line[2:] for line in p.stdout.splitlines() if line.startswith("@@")]
    if p.returncode != 0 or not marks:
        raise AssertionError(f"snippet exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return json.loads(marks[-1])


def nsbox_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.path.join(VENV, "bin", "nsbox"), *args], env=ENV, capture_output=True, text=True, timeout=120
    )


class TestWheel(unittest.TestCase):
    def test_version_matches_the_binaries(self) -> None:
        p = nsbox_cli("--version")
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.fullmatch(r"nsbox version (\S+)\n", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        assert m is not None
        raw = m.group(1)
        pkg = py("import nsbox; out(nsbox.__version__)")
        self.assertEqual(os.path.basename(WHEEL).split("-")[1], pkg)
        # The wheel's version is the binary's, made PEP 440.
        commit = re.search(r"([0-9a-f]{7,40})(?:-dirty)?$", raw)
        if commit and not raw.startswith("v"):
            self.assertIn("g" + commit.group(1), pkg)

    def test_binaries_side_by_side_root_only(self) -> None:
        bindir = os.path.join(VENV, "bin")
        for name in ("nsbox", "nsbox-init", "nsbox-serve"):
            st = os.stat(os.path.join(bindir, name))
            self.assertEqual(st.st_uid, 0, name)
            self.assertEqual(st.st_mode & 0o022, 0, f"{name}: mode {st.st_mode:o}")
            self.assertTrue(st.st_mode & 0o100, name)
        self.assertEqual(os.stat(bindir).st_mode & 0o022, 0)
        self.assertEqual(py("import nsbox; out(nsbox.find_binary())"), os.path.join(bindir, "nsbox"))

    def test_cli_run(self) -> None:
        p = nsbox_cli("run", "-c", "print(1)")
        self.assertEqual((p.returncode, p.stdout), (0, "1\n"), p.stderr)


class TestSource(unittest.TestCase):
    def test_python_3_9_syntax(self) -> None:
        """The package parses as Python 3.9 (the oldest it supports; the
        tests run on a newer one)."""
        import ast

        files = glob.glob(os.path.join(REPO, "python", "nsbox", "*.py"))
        self.assertGreater(len(files), 5)
        for path in files:
            with open(path) as f:
                src = f.read()
            try:
                ast.parse(src, path, feature_version=(3, 9))
            except SyntaxError as e:
                self.fail(f"{path}: not Python 3.9: {e}")
            self.assertIn("from __future__ import annotations", src, path)


class TestRunSubprocess(unittest.TestCase):
    """nsbox.run with no service: `nsbox run --json` underneath."""

    def test_run(self) -> None:
        self.assertFalse(os.path.exists(DEFAULT_SOCKET), f"{DEFAULT_SOCKET} exists: a service would serve run()")
        got = py(
            """
            import nsbox
            ok = nsbox.run("print(6 * 7)", labels={"test": "wheel"})
            fail = nsbox.run("import sys; print('bad', file=sys.stderr); sys.exit(3)")
            slow = nsbox.run("import time; time.sleep(30)", timeout=1)
            files = nsbox.run("print(open('in/a.txt').read())", files={"in/a.txt": "from host"})
            flood = nsbox.run("print('x' * 5000)", output_limit=1024)
            refused = nsbox.run("import socket", policy="strict")
            import asyncio, hashlib
            data = bytes(range(256)) * 4096
            hashed = nsbox.run("import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
                               stdin=data, files={"x": "with a workspace too"})
            lines = asyncio.run(nsbox.arun("print(input(), input())", stdin="é\\nb\\n"))
            out({
                "ok": [ok.ok, ok.status, ok.stdout, ok.exit_code, ok.policy, ok.limits.timeout_ms > 0,
                       ok.sandbox is not None and "pid" in ok.sandbox.namespaces],
                "fail": [fail.ok, fail.status, fail.exit_code, fail.stderr],
                "slow": [slow.status, slow.limit, slow.duration_ms < 10000],
                "files": [files.status, files.stdout],
                "flood": [flood.status, flood.limit],
                "refused": [refused.status, [v.name for v in refused.violations]],
                "stdin": [hashed.status, hashed.stdout.strip() == hashlib.sha256(data).hexdigest(), lines.stdout],
            })
            """
        )
        self.assertEqual(got["stdin"], ["ok", True, "é b\n"])
        self.assertEqual(got["ok"], [True, "ok", "42\n", 0, "default", True, True])
        self.assertEqual(got["fail"], [False, "error", 3, "bad\n"])
        self.assertEqual(got["slow"], ["timeout", "wall_time", True])
        self.assertEqual(got["files"], ["ok", "from host\n"])
        self.assertEqual(got["flood"], ["output_limit", "stdout"])
        self.assertEqual(got["refused"], ["policy_violation", ["socket"]])


class Service:
    """An nsbox serve of the venv's binary, for the test's life."""

    def __init__(self, listen: str, *flags: str) -> None:
        self.listen = listen
        self.proc = subprocess.Popen(
            [os.path.join(VENV, "bin", "nsbox"), "serve", "--listen=" + listen, *flags],
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        network, _, addr = listen.partition(":")
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"nsbox serve exited {self.proc.returncode}: {self.proc.stderr.read().decode()}")
            try:
                fam = socket.AF_UNIX if network == "unix" else socket.AF_INET
                with socket.socket(fam, socket.SOCK_STREAM) as s:
                    host, _, port = addr.rpartition(":")
                    s.connect(addr if network == "unix" else (host, int(port)))
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError("nsbox serve did not listen within 60 s")
                time.sleep(0.05)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stderr is not None
            self.proc.stderr.close()


class TestService(unittest.TestCase):
    """nsbox.run, arun and AsyncSandbox through a service given by NSBOX_SERVER."""

    svc: Service
    server = ""

    @classmethod
    def setUpClass(cls) -> None:
        d = tempfile.mkdtemp(dir=TMP)
        cls.server = "unix:" + os.path.join(d, "nsbox.sock")
        cls.svc = Service(cls.server, "--policies=default,datasci", "--pool=0")

    @classmethod
    def tearDownClass(cls) -> None:
        code = cls.svc.stop()
        assert code == 0, f"nsbox serve exited {code} after SIGTERM"
        assert not os.path.exists(cls.server[5:]), "the service left its socket"

    def test_run_through_the_service(self) -> None:
        got = py(
            """
            import nsbox, nsbox._http as h, re
            from nsbox._discover import configured
            ep = configured()
            def runs():
                m = h.Client(ep).request("GET", "/v1/metrics").body.decode()
                return sum(int(n) for n in re.findall(r'^nsbox_runs_total\\{[^}]*\\} (\\d+)', m, re.M))
            before = runs()
            ok = nsbox.run("print(open('a.txt').read(), end='')", files={"a.txt": b"bytes in"}, labels={"t": "svc"})
            slow = nsbox.run("import time; time.sleep(30)", timeout=1)
            try:
                nsbox.run("print(1)", policy="strict")
                refused = None
            except nsbox.PolicyRefused as e:
                refused = [e.status, e.code, "strict" in e.message]
            above = nsbox.run("print(1)", timeout=1e6)
            piped = nsbox.run("import sys; print(sys.stdin.buffer.read()[::-1])", stdin=b"\\x00in\\xff")
            out({"ep": str(ep), "ok": [ok.status, ok.stdout], "slow": [slow.status, slow.limit],
                 "refused": refused, "piped": [piped.status, piped.stdout],
                 "above": [above.status, above.error.step], "runs": runs() - before})
            """,
            env={"NSBOX_SERVER": self.server},
        )
        self.assertEqual(got["ep"], self.server)
        self.assertEqual(got["ok"], ["ok", "bytes in"])
        self.assertEqual(got["slow"], ["timeout", "wall_time"])
        self.assertEqual(got["refused"], [403, "policy_refused", True])
        # A timeout above the policy's: a run refused for its input is a
        # result, as from nsbox run, not an HTTP error.
        self.assertEqual(got["above"], ["sandbox_error", "policy"])
        self.assertEqual(got["piped"], ["ok", "b'\\xffni\\x00'\n"])
        self.assertEqual(got["runs"], 4)

    def test_async_sandbox(self) -> None:
        got = py(
            """
            import asyncio, time, nsbox
            async def main():
                res = {}
                async with nsbox.AsyncSandbox(policy="datasci") as a, nsbox.AsyncSandbox(policy="default") as b:
                    x, y = await asyncio.gather(a.run_code("import pandas as pd\\nn = 20\\nn"), b.run_code("21 * 2"))
                    res["gather"] = [x.text, y.text]
                    t = time.monotonic()
                    try:
                        await asyncio.wait_for(a.run_code("import time\\ntime.sleep(60)"), 1)
                    except asyncio.TimeoutError:
                        pass
                    # The cancelled cell is stopped by the service; the session lives.
                    for _ in range(100):
                        try:
                            after = await a.run_code("n + 1")
                            break
                        except nsbox.Conflict:
                            await asyncio.sleep(0.1)
                    res["after_cancel"] = [after.text, time.monotonic() - t < 15]
                    await a.files.write("d/x.bin", bytes(range(256)))
                    res["files"] = [[f.path, f.type, f.size] for f in await a.files.list("d")]
                    res["read"] = (await a.files.read("d/x.bin")) == bytes(range(256))
                    try:
                        await a.files.write("big", bytes(32 << 20 | 1))
                    except nsbox.LimitExceeded as e:
                        res["big"] = e.status
                    await a.files.remove("d/x.bin")
                    res["removed"] = await a.files.list("d")
                    res["arun"] = (await nsbox.arun("print('arun')")).stdout
                    res["info"] = (await a.info()).cells
                    res["closed"] = (await b.close()).status
                try:
                    await a.run_code("1")
                    res["gone"] = None
                except nsbox.SessionNotFound as e:
                    res["gone"] = e.status
                return res
            out(asyncio.run(main()))
            """,
            env={"NSBOX_SERVER": self.server},
        )
        self.assertEqual(got["gather"], ["20", "42"])
        self.assertEqual(got["after_cancel"], ["21", True])
        self.assertEqual(got["files"], [["d/x.bin", "file", 256]])
        self.assertTrue(got["read"])
        self.assertEqual(got["removed"], [])
        self.assertEqual(got["big"], 413)
        self.assertEqual(got["arun"], "arun\n")
        self.assertEqual(got["info"], 3)
        self.assertEqual(got["closed"], "ok")
        self.assertEqual(got["gone"], 404)

    def test_tcp_token(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token_file = os.path.join(TMP, "token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("a-token-of-thirty-two-characters\n")
        svc = Service(f"tcp:127.0.0.1:{port}", "--token-file=" + token_file, "--policies=default", "--pool=0")
        try:
            got = py(
                """
                import nsbox, os
                import asyncio
                res = {"ok": nsbox.run("print('tcp')").stdout,
                       "async": asyncio.run(nsbox.arun("print('tcp async')")).stdout}
                try:
                    nsbox.run("print(1)", token="a-wrong-token-of-thirty-two-char")
                except nsbox.Unauthorized as e:
                    res["wrong"] = e.status
                os.chmod(os.environ["NSBOX_TOKEN_FILE"], 0o644)
                try:
                    nsbox.run("print(1)")
                except nsbox.ServiceUnavailable as e:
                    res["loose"] = "chmod 600" in str(e)
                out(res)
                """,
                env={"NSBOX_SERVER": f"tcp:127.0.0.1:{port}", "NSBOX_TOKEN_FILE": token_file},
            )
        finally:
            self.assertEqual(svc.stop(), 0)
        self.assertEqual(got, {"ok": "tcp\n", "async": "tcp async\n", "wrong": 401, "loose": True})


class TestPrivateService(unittest.TestCase):
    """Sandbox with no service configured: the SDK starts its own."""

    def test_sandbox(self) -> None:
        got = py(
            """
            import threading, time, nsbox
            from nsbox import _private
            res = {}
            with nsbox.Sandbox(policy="datasci", timeout_per_cell=20) as sb:
                res["sock"] = sb.endpoint.address
                res["pid"] = _private._service._proc.pid
                sb.run_code("x = 41")
                res["state"] = sb.run_code("x + 1").text
                ex = sb.run_code(
                    "import matplotlib.pyplot as plt, pandas as pd\\n"
                    "plt.plot([1, 2, 3], [3, 1, 2])\\n"
                    "pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
                res["png"] = [o.png[:8].hex() for o in ex.outputs if o.type == "image/png"]
                res["html"] = ["<table" in o.html for o in ex.outputs if o.type == "text/html"]
                sb.files.write("in/data.csv", "a,b\\n1,2\\n", mode=0o600)
                res["list"] = [[f.path, f.type, f.size, f.mode] for f in sb.files.list("in")]
                res["csv"] = sb.run_code("import pandas as pd\\nint(pd.read_csv('in/data.csv').b.sum())").text
                sb.run_code("open('out.txt', 'w').write('from the cell')")
                res["read"] = sb.files.read("out.txt").decode()
                sb.files.remove("out.txt")
                try:
                    sb.files.write("big", bytes(32 << 20 | 1))
                except nsbox.LimitExceeded as e:
                    res["big"] = [e.status, e.code]
                try:
                    sb.files.read("out.txt")
                except nsbox.FileNotFound as e:
                    res["removed"] = e.status
                try:
                    sb.files.read("../etc/passwd")
                except nsbox.BadRequest as e:
                    res["dotdot"] = [e.status, e.code]
                sb.run_code("import os\\nos.symlink('/etc', 'ln')")
                try:
                    sb.files.read("ln/passwd")
                except nsbox.BadRequest as e:
                    res["link"] = [e.status, e.code]
                err = sb.run_code("def f():\\n    raise ValueError('boom')\\nf()")
                res["error"] = [err.ok, err.status, err.error.name, err.error.value, "in f" in err.error.traceback]
                t = time.monotonic()
                slow = sb.run_code("import time\\ntime.sleep(60)", timeout=1)
                res["timeout"] = [slow.status, time.monotonic() - t < 15]
                timer = threading.Timer(1, sb.interrupt)
                timer.start()
                t = time.monotonic()
                stopped = sb.run_code("import time\\ntime.sleep(60)")
                res["interrupt"] = [stopped.status, time.monotonic() - t < 15]
                res["alive"] = sb.run_code("x").text
                res["one_shot"] = nsbox.run("print('via the private service')").stdout
            res["closed"] = sb.closed
            try:
                sb.run_code("1")
            except nsbox.SessionNotFound as e:
                res["gone"] = [e.status, e.code]
            try:
                nsbox.Sandbox(policy="permissive")
            except nsbox.PolicyRefused as e:
                res["refused"] = [e.status, e.code]
            out(res)
            """
        )
        self.assertEqual(got["state"], "42")
        self.assertEqual(got["png"], ["89504e470d0a1a0a"])
        self.assertEqual(got["html"], [True])
        self.assertEqual(got["list"], [["in/data.csv", "file", 8, 0o600]])
        self.assertEqual(got["csv"], "2")
        self.assertEqual(got["read"], "from the cell")
        self.assertEqual(got["removed"], 404)
        self.assertEqual(got["big"], [413, "body_too_large"])
        self.assertEqual(got["dotdot"], [None, None])  # refused before it is sent
        self.assertEqual(got["link"], [400, "path_refused"])
        self.assertEqual(got["error"], [False, "error", "ValueError", "boom", True])
        self.assertEqual(got["timeout"], ["timeout", True])
        self.assertEqual(got["interrupt"], ["killed", True])
        self.assertEqual(got["alive"], "41")
        self.assertEqual(got["one_shot"], "via the private service\n")
        self.assertEqual(got["gone"], [404, "no_session"])
        self.assertEqual(got["refused"], [403, "policy_refused"])
        # Stopped at exit: the process and its directory are gone.
        self.assertFalse(os.path.exists(f"/proc/{got['pid']}"), "the private service outlived its process")
        self.assertFalse(os.path.exists(os.path.dirname(got["sock"])), "the private service left its directory")

    def test_process_killed(self) -> None:
        """A process killed with SIGKILL runs no exit handler: the kernel
        sends its service SIGTERM, which drains it (the session is
        closed, its sandbox torn down); the next private service removes
        the empty directory left behind."""
        code = PRELUDE + textwrap.dedent(
            """
            import time, nsbox
            from nsbox import _private
            sb = nsbox.Sandbox(policy="default")
            sb.run_code("x = 1")
            out([_private._service._proc.pid, sb.endpoint.address])
            time.sleep(120)
            """
        )
        p = subprocess.Popen([os.path.join(VENV, "bin", "python"), "-c", code], env=ENV, cwd=TMP,
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None
        line = ""
        while not line.startswith("@@"):
            line = p.stdout.readline()
            self.assertNotEqual(line, "", "the snippet ended before it opened its sandbox")
        pid, sock = json.loads(line[2:])
        p.kill()
        p.wait()
        p.stdout.close()
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse(os.path.exists(f"/proc/{pid}"), "the private service outlived its killed process")
        self.assertFalse(os.path.exists(sock), "the private service left its socket")
        left = os.path.dirname(sock)
        self.assertEqual(os.listdir(left), [])
        os.utime(left, (time.time() - 3600, time.time() - 3600))
        self.assertEqual(py("import nsbox; nsbox.Sandbox(policy='default').close(); out(1)"), 1)
        self.assertFalse(os.path.exists(left), "the next private service did not remove the empty directory")

    def test_documented_example(self) -> None:
        with open(os.path.join(REPO, "docs", "python.md")) as f:
            m = re.search(r"^## Example\n\n```python\n(.*?)```", f.read(), re.S | re.M)
        assert m is not None, "docs/python.md: no ```python block under ## Example"
        example = m.group(1)
        self.assertLessEqual(len(example.strip().splitlines()), 10)
        p = subprocess.run(
            [os.path.join(VENV, "bin", "python"), "-c", example], env=ENV, cwd=TMP,
            capture_output=True, text=True, timeout=300,
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "42\nTrue b'\\x89PNG'\nZeroDivisionError\n")

    def test_not_root(self) -> None:
        """Another user than root gets a rootless private service; nobody,
        whose home does not exist, has nowhere to keep its state, and the
        error says where and why."""
        got = py(
            """
            import nsbox
            try:
                nsbox.Sandbox()
            except nsbox.ServiceUnavailable as e:
                out(str(e))
            """,
            user=65534,
        )
        self.assertIn("mkdir /nonexistent: permission denied", got)

    def test_refused_binaries(self) -> None:
        """A bin/ others can write: nsbox serve refuses its nsbox-serve,
        and the SDK says why."""
        bindir = os.path.join(VENV, "bin")
        os.chmod(bindir, 0o775)
        try:
            got = py(
                """
                import nsbox
                try:
                    nsbox.Sandbox(policy="default")
                except nsbox.ServiceUnavailable as e:
                    out(str(e))
                """
            )
        finally:
            os.chmod(bindir, 0o755)
        self.assertIn("writable by group or others", got)
        self.assertIn(bindir, got)


if __name__ == "__main__":
    unittest.main()
