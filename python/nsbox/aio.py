"""AsyncSandbox: Sandbox's methods as asyncio coroutines.

Native asyncio, not threads: each call is an HTTP request on asyncio
streams (nsbox._http.AsyncClient), described by the same Call as
Sandbox's (nsbox._calls), so the two behave alike. Cancelling a run_code
closes its connection, which the service takes as the client gone: the
cell is stopped. Only starting the private service, once per process,
blocks, and runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import List, Mapping, Optional, Type, Union

from . import _calls, _private
from ._discover import configured
from ._http import AsyncClient, Endpoint
from .errors import NsboxError, SessionNotFound
from .results import Execution, FileInfo, Result, SessionInfo


class AsyncSandbox:
    """A session, as Sandbox, with coroutine methods.

        async with AsyncSandbox(policy="datasci") as sb:
            ex = await sb.run_code("1 + 1")

    or `sb = await AsyncSandbox.create(...)` and `await sb.close()`. The
    arguments are Sandbox's."""

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
        self._open_call = _calls.open_session(policy, timeout_per_cell, idle_timeout, labels)
        self._server, self._token = server, token
        self._client: Optional[AsyncClient] = None
        self.id = ""
        self.policy = policy
        self.created = ""
        self.files = AsyncFiles(self)
        self._closed = False
        self._final: Optional[Result] = None

    @classmethod
    async def create(
        cls,
        policy: str = "datasci",
        *,
        timeout_per_cell: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        labels: Optional[Mapping[str, str]] = None,
        server: Optional[str] = None,
        token: Optional[str] = None,
    ) -> "AsyncSandbox":
        sb = cls(
            policy,
            timeout_per_cell=timeout_per_cell,
            idle_timeout=idle_timeout,
            labels=labels,
            server=server,
            token=token,
        )
        await sb.open()
        return sb

    async def open(self) -> "AsyncSandbox":
        """Opens the session (create and `async with` call it)."""
        if self._client is not None:
            return self
        ep = configured(self._server, self._token)
        if ep is None:
            ep = await asyncio.get_running_loop().run_in_executor(None, _private.ensure)
        client = AsyncClient(ep)
        s = await _calls.ado(client, self._open_call)
        self._client = client
        self.id, self.policy, self.created = s.id, s.policy, s.created
        return self

    @property
    def endpoint(self) -> Endpoint:
        return self._c().endpoint

    @property
    def closed(self) -> bool:
        return self._closed

    def _c(self) -> AsyncClient:
        if self._client is None:
            raise NsboxError("the AsyncSandbox is not open: use `async with` or AsyncSandbox.create()")
        return self._client

    async def run_code(self, code: str, *, timeout: Optional[float] = None) -> Execution:
        return await _calls.ado(self._c(), _calls.run_cell(self.id, code, timeout))

    async def interrupt(self) -> bool:
        return await _calls.ado(self._c(), _calls.interrupt(self.id))

    async def info(self) -> SessionInfo:
        return await _calls.ado(self._c(), _calls.info(self.id))

    async def close(self) -> Optional[Result]:
        if self._closed or self._client is None:
            return self._final
        self._closed = True
        try:
            self._final = await _calls.ado(self._client, _calls.close(self.id))
        except SessionNotFound:
            self._final = None
        return self._final

    async def __aenter__(self) -> "AsyncSandbox":
        return await self.open()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, policy={self.policy!r}, closed={self._closed})"


class AsyncFiles:
    """Sandbox.files as coroutines."""

    def __init__(self, sb: AsyncSandbox) -> None:
        self._sb = sb

    async def write(self, path: str, data: Union[bytes, str], *, mode: Optional[int] = None) -> None:
        await _calls.ado(self._sb._c(), _calls.write_file(self._sb.id, path, data, mode))

    async def read(self, path: str) -> bytes:
        return await _calls.ado(self._sb._c(), _calls.read_file(self._sb.id, path))

    async def list(self, dir: str = "") -> List[FileInfo]:
        return await _calls.ado(self._sb._c(), _calls.list_files(self._sb.id, dir))

    async def remove(self, path: str) -> None:
        await _calls.ado(self._sb._c(), _calls.remove_file(self._sb.id, path))
