"""The process's private service: `nsbox serve` on a temporary Unix socket.

Started on first need (a Sandbox with no service configured, the caller
root), shared by every Sandbox and run of the process, stopped at exit:
atexit sends SIGTERM, which drains it (runs and cells in flight finish,
sessions close, nothing of their sandboxes is left), and waits for it; a
second SIGTERM after DRAIN_GRACE kills what still runs, SIGKILL after
KILL_GRACE more. Should the process die without running atexit (SIGKILL,
os._exit), the service gets SIGTERM from the kernel (PR_SET_PDEATHSIG),
set from a thread that lives as long as the process, since the kernel
sends the signal when the thread that started the child ends.

The socket lies in a directory of its own, mode 0700, so only this
process's user (root) can connect; it is removed with the directory. A
killed process leaves that directory empty (its service removes the
socket as it drains); the next private service's start removes it.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import glob
import logging
import os
import queue
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from typing import Deque, List, Optional

from ._discover import find_binary
from ._http import Client, Endpoint
from .errors import NsboxError, ServiceUnavailable

log = logging.getLogger("nsbox.service")

# The service's flags: one sandbox of each policy started ahead (the
# default two per policy suits a machine's service; a process's own needs
# one to make its first run and session fast), and the service's limits
# on runs and sessions otherwise.
SERVE_FLAGS = ["--pool=1"]
START_TIMEOUT = 120.0  # the base root is built on first use
DRAIN_GRACE = 30.0
KILL_GRACE = 10.0

_PR_SET_PDEATHSIG = 1
# libc's prctl, looked up in the parent: the child between fork and exec
# must not load libraries.
_prctl = ctypes.CDLL(None, use_errno=True).prctl

_lock = threading.Lock()
_service: Optional["PrivateService"] = None


def running() -> Optional[Endpoint]:
    """The private service's endpoint if it runs, else None."""
    s = _service
    return s.endpoint if s is not None and s.alive() else None


def ensure() -> Endpoint:
    """The private service's endpoint, starting it if need be."""
    global _service
    with _lock:
        if _service is not None and _service.alive():
            return _service.endpoint
        if _service is not None:
            tail = _service.log_tail()
            _service.stop()
            _service = None
            raise ServiceUnavailable("the private nsbox service stopped; its last lines:\n" + tail)
        s = PrivateService(find_binary())
        s.start()
        _service = s
        atexit.register(_stop_at_exit)
        return s.endpoint


def stop() -> None:
    """Stops the private service now (drained), if it runs; a later need
    starts a new one."""
    global _service
    with _lock:
        s, _service = _service, None
    if s is not None:
        s.stop()


def _stop_at_exit() -> None:
    try:
        stop()
    except Exception as e:  # at exit, report and go on
        log.warning("stop the private nsbox service: %s", e)


DIR_PREFIX = "nsbox-sdk-"
# A directory of a private service older than this and empty is left over
# from a process that was killed: its service drained and removed its
# socket, but nothing was left to remove the directory.
STALE_AFTER = 60.0


def _sweep() -> None:
    """Removes the empty directories killed processes' services left."""
    now = time.time()
    for d in glob.glob(os.path.join(tempfile.gettempdir(), DIR_PREFIX + "*")):
        try:
            st = os.lstat(d)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > STALE_AFTER:
                os.rmdir(d)  # only if empty: a live service's socket is in its own
        except OSError:
            pass


class PrivateService:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        _sweep()
        self.dir = tempfile.mkdtemp(prefix=DIR_PREFIX)
        self.endpoint = Endpoint("unix", os.path.join(self.dir, "nsbox.sock"))
        self._proc: Optional[subprocess.Popen[bytes]] = None
        self._lines: Deque[str] = collections.deque(maxlen=40)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self) -> str:
        return "\n".join(self._lines) or "(nothing on its stderr)"

    def start(self) -> None:
        argv = [self.binary, "serve", "--listen=unix:" + self.endpoint.address] + SERVE_FLAGS
        started: "queue.Queue[object]" = queue.Queue()
        # The keeper thread starts the service and then waits as long as
        # the process lives, so the parent-death signal fires only when
        # the process ends.
        threading.Thread(target=self._keep, args=(argv, started), name="nsbox-service", daemon=True).start()
        got = started.get()
        if isinstance(got, BaseException):
            shutil.rmtree(self.dir, ignore_errors=True)
            raise ServiceUnavailable(f"start {' '.join(argv)}: {got}") from got
        self._proc = got  # type: ignore[assignment]
        threading.Thread(target=self._read_stderr, name="nsbox-service-log", daemon=True).start()
        self._wait_ready(argv)

    def _keep(self, argv: List[str], started: "queue.Queue[object]") -> None:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=_die_with_parent,
                close_fds=True,
            )
        except OSError as e:
            started.put(e)
            return
        started.put(proc)
        threading.Event().wait()

    def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._lines.append(line)
            log.debug("%s", line)

    def _wait_ready(self, argv: List[str]) -> None:
        client = Client(self.endpoint)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if not self.alive():
                self._reap()
                raise ServiceUnavailable(
                    f"{' '.join(argv)} exited with status {self._proc.returncode if self._proc else '?'}:\n"
                    + self.log_tail()
                )
            if os.path.exists(self.endpoint.address):
                try:
                    if client.request("GET", "/v1/health", timeout=5).status == 200:
                        return
                except NsboxError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceUnavailable(
                    f"{' '.join(argv)} did not answer within {START_TIMEOUT:g} s:\n" + self.log_tail()
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM (drain), a second SIGTERM after DRAIN_GRACE, SIGKILL
        after KILL_GRACE; then the directory is removed."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            for sig, grace in ((signal.SIGTERM, DRAIN_GRACE), (signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, None)):
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(grace)
                    break
                except subprocess.TimeoutExpired:
                    log.warning("the private nsbox service did not stop within %s s of %s", grace, sig.name)
        self._reap()

    def _reap(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting thread ends."""
    if _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        os._exit(125)
