"""The network check (network.py): its decisions on their own, the proxy
key of the config, and the shipped runner (../runner.py) run on programs
that try each route around a proxy, with the "proxy", a forbidden TCP
listener and a fake resolver (UDP) opened by the test on 127.0.0.1.

Run by TestPythonUnit (sandbox/pyrunner), or by hand from sandbox/pyrunner:
    python3.11 -I -B -m unittest discover -s runner/tests -t .
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import unittest

from runner.network import NET_EVENTS, _net_refusal
from runner.tests.test_bundle import BUNDLE
from runner.tests.test_static import config

PROXY = ("127.0.0.1", 3128)


class Decisions(unittest.TestCase):
    """_net_refusal: None lets the event go on, else (name, detail)."""

    def refused(self, event, *args):
        got = _net_refusal(PROXY, event, args)
        self.assertIsNotNone(got, "%s%r went through" % (event, args))
        return got

    def allowed(self, event, *args):
        self.assertIsNone(_net_refusal(PROXY, event, args), "%s%r refused" % (event, args))

    def test_connect(self):
        self.allowed("socket.connect", None, ("127.0.0.1", 3128))
        self.allowed("socket.connect", None, "/tmp/unix.sock")  # AF_UNIX
        self.allowed("socket.connect", None, b"\0abstract")
        name, detail = self.refused("socket.connect", None, ("127.0.0.1", 8080))
        self.assertEqual(name, "127.0.0.1:8080")
        self.assertIn("127.0.0.1:3128", detail)
        self.assertIn("network.allow", detail)
        self.assertEqual(self.refused("socket.connect", None, ("93.184.216.34", 443))[0],
                         "93.184.216.34:443")
        self.assertEqual(self.refused("socket.connect", None, ("::1", 3128, 0, 0))[0],
                         "[::1]:3128")
        self.refused("socket.connect", None, ("localhost", 3128))  # resolved in C: no event

    def test_connect_look_alikes(self):
        # Subclasses could compare equal to anything: never the proxy, and
        # none of their code runs.
        class Host(str):
            def __eq__(self, other):
                raise AssertionError("the hook ran the program's __eq__")

            __hash__ = str.__hash__

            def __str__(self):
                raise AssertionError("the hook ran the program's __str__")

        class Port(int):
            def __eq__(self, other):
                raise AssertionError("the hook ran the program's __eq__")

            __hash__ = int.__hash__

        class Addr(tuple):
            def __getitem__(self, i):
                raise AssertionError("the hook ran the program's __getitem__")

            def __len__(self):
                raise AssertionError("the hook ran the program's __len__")

        self.assertEqual(self.refused("socket.connect", None, (Host("127.0.0.1"), 3128))[0],
                         "?:3128")
        self.refused("socket.connect", None, ("127.0.0.1", Port(3128)))
        self.assertEqual(self.refused("socket.connect", None, Addr(("127.0.0.1", 3128)))[0],
                         "127.0.0.1:3128")
        self.refused("socket.getnameinfo", Addr(("8.8.8.8", 53)))

    def test_datagrams(self):
        name, detail = self.refused("socket.sendto", None, ("127.0.0.53", 53))
        self.assertEqual(name, "127.0.0.53:53")
        self.assertIn("no UDP and no DNS", detail)
        self.refused("socket.sendmsg", None, ("8.8.8.8", 53))
        self.allowed("socket.sendmsg", None, None)  # a connected socket's send
        self.allowed("socket.sendto", None, "/tmp/dgram.sock")  # AF_UNIX

    def test_lookups(self):
        for event, args in [("socket.getaddrinfo", ("example.com", 443, 0, 0, 0)),
                            ("socket.getaddrinfo", (b"example.com", 443, 0, 0, 0)),
                            ("socket.getaddrinfo", (None, 443, 0, 0, 0)),
                            ("socket.gethostbyname", ("example.com",)),
                            ("socket.gethostbyaddr", ("8.8.8.8",)),
                            ("socket.getnameinfo", (("8.8.8.8", 53), 0))]:
            name, detail = self.refused(event, *args)
            self.assertIn("no resolver", detail)
            self.assertIn("HTTP_PROXY", detail)
        self.assertEqual(self.refused("socket.getaddrinfo", "example.com", 443, 0, 0, 0)[0],
                         "example.com")
        # The proxy's own address: what requests and httpx look up.
        self.allowed("socket.getaddrinfo", "127.0.0.1", 3128, 0, 1, 0)
        self.allowed("socket.getaddrinfo", b"127.0.0.1", 3128, 0, 1, 0)
        self.allowed("socket.gethostbyname", "127.0.0.1")
        self.assertEqual(self.refused("socket.getaddrinfo", "x" * 1000, 1, 0, 0, 0)[0],
                         "x" * 255 + "...")

    def test_new_sockets(self):
        AF_UNIX, AF_INET, AF_INET6 = socket.AF_UNIX, socket.AF_INET, socket.AF_INET6
        self.allowed("socket.__new__", None, AF_INET, socket.SOCK_STREAM, 0)
        self.allowed("socket.__new__", None, AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC, 6)
        self.allowed("socket.__new__", None, -1, -1, -1)  # the defaults: AF_INET, a stream
        self.allowed("socket.__new__", None, AF_UNIX, socket.SOCK_DGRAM, 0)
        name, detail = self.refused("socket.__new__", None, AF_INET, socket.SOCK_DGRAM, 0)
        self.assertEqual(name, "socket(AF_INET, SOCK_DGRAM)")
        self.assertIn("only TCP stream sockets", detail)
        self.assertEqual(self.refused("socket.__new__", None, AF_INET6,
                                      socket.SOCK_RAW | socket.SOCK_NONBLOCK, 0)[0],
                         "socket(AF_INET6, SOCK_RAW)")
        self.refused("socket.__new__", None, -1, socket.SOCK_DGRAM, 0)

    def test_linux_constants(self):
        # network.py states Linux's values, since the runner imports no
        # socket module: they must be the real ones.
        from runner import network
        for name in ("AF_INET", "AF_INET6", "SOCK_STREAM", "SOCK_DGRAM", "SOCK_RAW"):
            self.assertEqual(getattr(network, name), getattr(socket, name), name)

    def test_other_events_pass(self):
        self.assertNotIn("socket.bind", NET_EVENTS)
        self.assertIsNone(_net_refusal(PROXY, "socket.bind", (None, ("0.0.0.0", 80))))


class ProxyKey(unittest.TestCase):
    def test_values(self):
        self.assertIsNone(config(proxy=None).proxy)
        self.assertEqual(config(proxy="127.0.0.1:3128").proxy, ("127.0.0.1", 3128))

    def test_bad_values_stop_the_runner(self):
        for bad in ["127.0.0.1", "localhost:3128", "127.0.0.01:3128", "127.0.0.1:0",
                    "127.0.0.1:65536", "[::1]:3128", "127.0.0.1:+80", 3128, ["127.0.0.1", 3128]]:
            with self.assertRaises(SystemExit, msg=repr(bad)):
                _stderr_quiet(config, proxy=bad)


def _stderr_quiet(f, **kw):
    """f(**kw) with the runner's complaint on stderr swallowed (it exits
    through posix._exit, so the test catches that instead)."""
    import posix
    real_exit, real_stderr = posix._exit, sys.stderr

    def fake_exit(code):
        raise SystemExit(code)

    posix._exit = fake_exit
    sys.stderr = open(os.devnull, "w")
    try:
        return f(**kw)
    finally:
        sys.stderr.close()
        posix._exit, sys.stderr = real_exit, real_stderr


class Listener:
    """A TCP listener on 127.0.0.1 that records what each connection
    sends (up to the first blank line) and answers with reply."""

    def __init__(self, reply=b""):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.received = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    if self.reply:
                        conn.sendall(self.reply)
                except OSError:
                    pass
                self.received.append(data)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


def run_runner(program, proxy, env=None):
    """The shipped runner on program, with proxy in its config: (exit
    code, stderr, the report's runtime violations as dicts)."""
    cfg = {"mode": "run", "allow": None, "deny_builtins": None, "deny_events": None,
           "strict_attrs": False, "report_fd": None, "filename": "<program>",
           "writable_dirs": ["/workspace", "/tmp", "/dev/shm"], "max_violation_lines": 1000,
           "exit_policy_violation": 126, "exit_syntax_error": 1, "outputs": False,
           "preload": [], "max_output_bytes": 4 << 20, "proxy": proxy,
           "python_mode": "guarded", "restricted_lib": ""}
    r, w = os.pipe()
    cfg["report_fd"] = w  # passed on at the same number
    pid_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    pid_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-S", "-s", "-P", BUNDLE, json.dumps(cfg)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, pass_fds=(w,), env=pid_env)
    os.close(w)
    with os.fdopen(r, "rb") as report:
        src = textwrap.dedent(program).encode()
        # The program's frame (Go's pyrunner.EncodeProgram), no input.
        out, err = proc.communicate(b"PROGRAM %d\n" % len(src) + src, timeout=60)
        lines = [json.loads(l) for l in report.read().splitlines()]
    violations = [l for l in lines if "kind" in l and l["kind"] not in ("ready", "outputs")]
    return proc.returncode, out.decode(), err.decode(), violations


class Runner(unittest.TestCase):
    """The hook, installed for real in a fresh interpreter."""

    longMessage = False

    def setUp(self):
        self.proxy = Listener(reply=b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.forbidden = Listener()
        self.resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.resolver.bind(("127.0.0.1", 0))
        self.resolver.setblocking(False)
        self.proxy_addr = "127.0.0.1:%d" % self.proxy.port

    def tearDown(self):
        self.proxy.close()
        self.forbidden.close()
        self.resolver.close()

    def resolver_got(self):
        try:
            return self.resolver.recv(4096)
        except BlockingIOError:
            return None

    def test_each_route_around_the_proxy(self):
        F, D = self.forbidden.port, self.resolver.getsockname()[1]
        program = """
            import socket
            tries = {
                "connect": lambda: socket.create_connection(("127.0.0.1", %(F)d), timeout=5),
                "connect_ex": lambda: socket.socket().connect_ex(("127.0.0.1", %(F)d)),
                "getaddrinfo": lambda: socket.getaddrinfo("api.example.com", 443),
                "gethostbyname": lambda: socket.gethostbyname("api.example.com"),
                "gethostbyname_ex": lambda: socket.gethostbyname_ex("api.example.com"),
                "gethostbyaddr": lambda: socket.gethostbyaddr("127.0.0.3"),
                "getnameinfo": lambda: socket.getnameinfo(("127.0.0.2", 53), 0),
                "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
                "udp6": lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM),
                "raw": lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1),
                "sendto": lambda: socket.socket().sendto(b"q", ("127.0.0.1", %(D)d)),
                "sendmsg": lambda: socket.socket().sendmsg([b"q"], [], 0, ("127.0.0.1", %(D)d)),
            }
            for name, f in tries.items():
                try:
                    f()
                    print(name, "went through")
                except PermissionError as e:
                    print(name, "refused:", e)
            # Still allowed: AF_UNIX sockets (asyncio's self-pipe) and the proxy.
            a, b = socket.socketpair()
            a.sendall(b"x"); assert b.recv(1) == b"x"
            s = socket.create_connection(("127.0.0.1", %(P)d), timeout=5)
            s.sendall(b"CONNECT api.example.com:443 HTTP/1.1\\r\\n\\r\\n")
            print("proxy:", s.recv(100).split(b"\\r\\n")[0].decode())
        """ % {"F": F, "D": D, "P": self.proxy.port}
        code, out, err, violations = run_runner(program, self.proxy_addr)
        self.assertEqual(code, 0, err)
        self.assertNotIn("went through", out, out)
        self.assertIn("proxy: HTTP/1.1 200 Connection established", out, out)
        self.assertEqual(sum(" refused: [Errno 13] " in l for l in out.splitlines()), 12, out)
        got = {(v["kind"], v["name"]) for v in violations}
        want = {("network", n) for n in [
            "127.0.0.1:%d" % F, "api.example.com", "127.0.0.3", "127.0.0.2",
            "socket(AF_INET, SOCK_DGRAM)", "socket(AF_INET6, SOCK_DGRAM)",
            "socket(AF_INET, SOCK_RAW)", "127.0.0.1:%d" % D]}
        self.assertEqual(got, want, violations)
        for v in violations:
            self.assertGreater(v["line"], 0, v)
        self.proxy.close()
        self.forbidden.close()
        self.assertEqual(self.proxy.received, [b"CONNECT api.example.com:443 HTTP/1.1\r\n\r\n"])
        self.assertEqual(self.forbidden.received, [], "the forbidden listener got a connection")
        self.assertIsNone(self.resolver_got(), "the fake resolver got a datagram")

    def test_no_proxy_changes_nothing(self):
        # A run without network (proxy null): the runner checks no socket
        # event (the kernel layer refuses AF_INET there).
        program = """
            import socket
            s = socket.create_connection(("127.0.0.1", %d), timeout=5)
            s.sendall(b"hello\\r\\n\\r\\n"); s.close()
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.sendto(b"q", ("127.0.0.1", %d))
            print("ok")
        """ % (self.forbidden.port, self.resolver.getsockname()[1])
        code, out, err, violations = run_runner(program, None)
        self.assertEqual((code, out.strip(), violations), (0, "ok", []), err)

    def test_a_thread_is_checked_too(self):
        program = """
            import socket, threading
            seen = []
            def go():
                try:
                    socket.create_connection(("127.0.0.1", %d), timeout=5)
                except PermissionError:
                    seen.append("refused")
            t = threading.Thread(target=go); t.start(); t.join()
            print(seen)
        """ % self.forbidden.port
        code, out, err, violations = run_runner(program, self.proxy_addr)
        self.assertEqual((code, out.strip()), (0, "['refused']"), err)
        self.assertEqual([v["kind"] for v in violations], ["network"])
        self.assertEqual(self.forbidden.received, [])


if __name__ == "__main__":
    unittest.main()
