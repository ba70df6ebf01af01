"""HTTP to the service over a Unix socket or TCP, standard library only.

Two transports with one interface: Client (blocking, http.client with a
Unix-socket connection class) and AsyncClient (asyncio streams, a small
HTTP/1.1 client: the request has a Content-Length, the answer is read to
its Content-Length, its chunks, or the connection's end). Each request
uses its own connection, closed afterwards: a connection is cheap on a
Unix socket, calls from several threads or tasks never share one, and a
caller that gives up on a run closes its connection, which the service
takes as "the client went away" and stops the run.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .errors import NsboxError, ServiceUnavailable, from_response

# How long connecting may take; a request then waits as long as its run.
CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Endpoint:
    """Where the service listens: network "unix" (address a socket path)
    or "tcp" (address HOST:PORT), and the bearer token for TCP."""

    network: str
    address: str
    token: Optional[str] = field(default=None, repr=False)

    def __str__(self) -> str:
        return f"{self.network}:{self.address}"


@dataclass(frozen=True)
class Response:
    status: int
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise NsboxError(f"the service's answer is not JSON: {e}: {self.body[:200]!r}", status=self.status) from e


def _headers(ep: Endpoint, body: Optional[bytes], content_type: Optional[str]) -> Dict[str, str]:
    h = {"Host": "nsbox", "Accept": "application/json", "Connection": "close"}
    if body is not None:
        h["Content-Length"] = str(len(body))
        h["Content-Type"] = content_type or "application/json"
    if ep.token is not None:
        h["Authorization"] = "Bearer " + ep.token
    return h


def check(resp: Response, *ok: int) -> Response:
    """resp if its status is one of ok, else the service's typed error."""
    if resp.status in ok:
        return resp
    code, message = None, ""
    try:
        err = json.loads(resp.body).get("error") or {}
        code, message = err.get("code"), str(err.get("message", ""))
    except (ValueError, AttributeError):
        message = resp.body[:500].decode("utf-8", "replace").strip()
    retry: Optional[float] = None
    if "retry-after" in resp.headers:
        try:
            retry = float(resp.headers["retry-after"])
        except ValueError:
            retry = None
    raise from_response(resp.status, code, message or f"HTTP {resp.status}", retry)


class _UnixConnection(http.client.HTTPConnection):
    """An HTTPConnection to a Unix socket."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("nsbox", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(CONNECT_TIMEOUT)
            s.connect(self._path)
            s.settimeout(self.timeout)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Client:
    """Blocking requests to one service."""

    def __init__(self, ep: Endpoint) -> None:
        self.endpoint = ep

    def request(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        *,
        content_type: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        """One request; timeout bounds each wait for the answer (None: as
        long as the run takes, which the service bounds)."""
        ep = self.endpoint
        conn: http.client.HTTPConnection
        if ep.network == "unix":
            conn = _UnixConnection(ep.address, timeout)
        else:
            host, port = _split_host_port(ep.address)
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            try:
                conn.connect()
            except OSError as e:
                raise ServiceUnavailable(f"connect to the nsbox service at {ep}: {e}") from e
            if conn.sock is not None and ep.network == "tcp":
                conn.sock.settimeout(timeout)
            conn.request(method, path, body=body, headers=_headers(ep, body, content_type))
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        except (OSError, http.client.HTTPException) as e:
            raise NsboxError(f"{method} {path} at the nsbox service {ep}: {e}") from e
        finally:
            conn.close()

    def json(self, method: str, path: str, payload: Any = None, *ok: int, timeout: Optional[float] = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        return check(self.request(method, path, body, timeout=timeout), *ok).json()


class AsyncClient:
    """The same requests as coroutines, on asyncio streams. Cancelling one
    closes its connection: the service stops the run or cell in flight."""

    def __init__(self, ep: Endpoint) -> None:
        self.endpoint = ep

    async def request(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        *,
        content_type: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        ep = self.endpoint
        try:
            if ep.network == "unix":
                opening = asyncio.open_unix_connection(ep.address, limit=1 << 20)
            else:
                host, port = _split_host_port(ep.address)
                opening = asyncio.open_connection(host, port, limit=1 << 20)
            reader, writer = await asyncio.wait_for(opening, CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as e:
            raise ServiceUnavailable(f"connect to the nsbox service at {ep}: {e or 'timed out'}") from e
        try:
            head = f"{method} {path} HTTP/1.1\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in _headers(ep, body, content_type).items()
            )
            writer.write(head.encode("latin-1") + b"\r\n" + (body or b""))
            await writer.drain()
            return await asyncio.wait_for(_read_response(reader), timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            raise NsboxError(f"{method} {path} at the nsbox service {ep}: {e}") from e
        except asyncio.TimeoutError as e:
            raise NsboxError(f"{method} {path} at the nsbox service {ep}: no answer within {timeout} s") from e
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def json(self, method: str, path: str, payload: Any = None, *ok: int, timeout: Optional[float] = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        return check(await self.request(method, path, body, timeout=timeout), *ok).json()


async def _read_response(reader: asyncio.StreamReader) -> Response:
    """Reads one HTTP/1.1 answer: status line, headers, body."""
    line = await reader.readuntil(b"\r\n")
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP answer: {line[:100]!r}")
    status = int(parts[1])
    headers: Dict[str, str] = {}
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if status in (204, 304) or 100 <= status < 200:
        return Response(status, headers, b"")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return Response(status, headers, b"".join(chunks))
    if "content-length" in headers:
        return Response(status, headers, await reader.readexactly(int(headers["content-length"])))
    return Response(status, headers, await reader.read())


def _split_host_port(addr: str) -> Tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ServiceUnavailable(f"service address tcp:{addr}: want tcp:HOST:PORT")
    return host.strip("[]"), int(port)
