"""Sandbox: a session, a live sandbox whose interpreter runs cells one at a
time (docs/sessions.md), over the service's /v1/sessions API."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import List, Mapping, Optional, Type, Union

from . import _calls, _private
from ._discover import configured
from ._http import Client, Endpoint
from .errors import SessionNotFound
from .results import Execution, FileInfo, Result, SessionInfo


def session_endpoint(server: Optional[str], token: Optional[str]) -> Endpoint:
    """The service a session opens on: the configured one, else this
    process's private service (started if need be; root only)."""
    return configured(server, token) or _private.ensure()


class Sandbox:
    """A session: Python's state (variables, imports, files in
    /workspace) persists from one run_code to the next.

    policy: a policy the service serves ("datasci": numpy, pandas,
    matplotlib, seaborn, scipy, statsmodels, scikit-learn, Excel,
    Parquet). timeout_per_cell: seconds, at most the policy's timeout
    (its default). idle_timeout: seconds without a cell before the service
    closes the session (default 600). labels: recorded with every cell in
    the audit log. server, token: a service chosen explicitly (else
    NSBOX_SERVER, the default socket, or a private service when root).

    Use it as a context manager, or call close(). The service closes a
    forgotten session after its idle timeout.
    """

    def __init__(
        self,
        policy: str = "datasci",
        *,
        timeout_per_cell: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        labels: Optional[Mapping[str, str]] = None,
        server: Optional[str] = None,
        token: Optional[str] = None,
    ) -> None:
        self._client = Client(session_endpoint(server, token))
        s = _calls.do(self._client, _calls.open_session(policy, timeout_per_cell, idle_timeout, labels))
        self.id: str = s.id
        self.policy: str = s.policy
        self.created: str = s.created
        self.files = Files(self)
        self._closed = False
        self._close_lock = threading.Lock()
        self._final: Optional[Result] = None

    @property
    def endpoint(self) -> Endpoint:
        """The service the session lives on."""
        return self._client.endpoint

    @property
    def closed(self) -> bool:
        return self._closed

    def run_code(self, code: str, *, timeout: Optional[float] = None) -> Execution:
        """Runs one cell and returns its Execution: its output, display
        outputs (a figure's PNG, a DataFrame's HTML, the last expression's
        value), and its exception as data (Execution.error). timeout:
        seconds, at most the session's timeout_per_cell. Raises
        SessionNotFound once the session has ended, Conflict while another
        cell runs."""
        return _calls.do(self._client, _calls.run_cell(self.id, code, timeout))

    def interrupt(self) -> bool:
        """Sends KeyboardInterrupt to the running cell (from another
        thread); True if a cell was running."""
        return _calls.do(self._client, _calls.interrupt(self.id))

    def info(self) -> SessionInfo:
        """The session as the service sees it (cells run, running, ended)."""
        return _calls.do(self._client, _calls.info(self.id))

    def close(self) -> Optional[Result]:
        """Closes the session (a running cell is killed) and returns the
        session's own result (how its interpreter ended, its CPU time and
        peak memory); None if it had already ended. Idempotent."""
        with self._close_lock:
            if self._closed:
                return self._final
            self._closed = True
            try:
                self._final = _calls.do(self._client, _calls.close(self.id))
            except SessionNotFound:
                self._final = None
            return self._final

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, policy={self.policy!r}, closed={self._closed})"


class Files:
    """The session's /workspace. Paths are relative to it; a path that is
    absolute, has "..", or passes through a symbolic link is refused
    (BadRequest). The calls work between cells and while one runs."""

    def __init__(self, sb: Sandbox) -> None:
        self._sb = sb

    def write(self, path: str, data: Union[bytes, str], *, mode: Optional[int] = None) -> None:
        """Writes data (str as UTF-8) to path, creating missing
        directories; mode: permission bits (default 0o644)."""
        _calls.do(self._sb._client, _calls.write_file(self._sb.id, path, data, mode))

    def read(self, path: str) -> bytes:
        """The file's bytes; FileNotFound if there is none."""
        return _calls.do(self._sb._client, _calls.read_file(self._sb.id, path))

    def list(self, dir: str = "") -> List[FileInfo]:
        """The entries of dir ("" is /workspace itself), sorted by name;
        links are listed, never followed."""
        return _calls.do(self._sb._client, _calls.list_files(self._sb.id, dir))

    def remove(self, path: str) -> None:
        """Removes a file, link or empty directory."""
        _calls.do(self._sb._client, _calls.remove_file(self._sb.id, path))
