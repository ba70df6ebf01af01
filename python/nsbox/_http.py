"""HTTP to the service over a Unix socket or TCP, standard library only.

Two transports with one interface: Client (blocking, http.client with a
Unix-socket connection class) and AsyncClient (a small HTTP/1.1 client on
the event loop's socket calls: the request has a Content-Length, the
answer is read to its Content-Length, its chunks, or the connection's
end). Both read the service's answer even when it came, and the
connection closed, before the whole body was sent (an early 404 or 413). Each request
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
            try:
                conn.request(method, path, body=body, headers=_headers(ep, body, content_type))
            except (BrokenPipeError, ConnectionResetError):
                # The service answered (an error) before reading the whole
                # body and closed the connection: its answer is waiting.
                pass
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
    """The same requests as coroutines, on the event loop's non-blocking
    socket calls. Cancelling one closes its connection: the service stops
    the run or cell in flight."""

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
        loop = asyncio.get_running_loop()
        try:
            if ep.network == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                addr: Any = ep.address
            else:
                host, port = _split_host_port(ep.address)
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                if not infos:
                    raise OSError(f"no address for {host}")
                family, _, _, _, addr = infos[0]
                sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            raise ServiceUnavailable(f"connect to the nsbox service at {ep}: {e}") from e
        try:
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, addr), CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as e:
                raise ServiceUnavailable(f"connect to the nsbox service at {ep}: {e or 'timed out'}") from e
            head = f"{method} {path} HTTP/1.1\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in _headers(ep, body, content_type).items()
            )
            try:
                await loop.sock_sendall(sock, head.encode("latin-1") + b"\r\n" + (body or b""))
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered before the whole body was read: read the answer
            return await asyncio.wait_for(_read_response(_SockReader(loop, sock)), timeout)
        except (OSError, EOFError, ValueError) as e:
            raise NsboxError(f"{method} {path} at the nsbox service {ep}: {e}") from e
        except asyncio.TimeoutError as e:
            raise NsboxError(f"{method} {path} at the nsbox service {ep}: no answer within {timeout} s") from e
        finally:
            sock.close()

    async def json(self, method: str, path: str, payload: Any = None, *ok: int, timeout: Optional[float] = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        return check(await self.request(method, path, body, timeout=timeout), *ok).json()


class _SockReader:
    """Buffered reads from a non-blocking socket through the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self._loop, self._sock, self._buf = loop, sock, bytearray()

    async def _more(self) -> bool:
        chunk = await self._loop.sock_recv(self._sock, 1 << 16)
        self._buf += chunk
        return bool(chunk)

    async def readline(self) -> bytes:
        while True:
            i = self._buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self._buf[: i + 2])
                del self._buf[: i + 2]
                return line
            if len(self._buf) > 1 << 16:
                raise ValueError("an HTTP line longer than 64 KiB")
            if not await self._more():
                raise EOFError("the service closed the connection mid-answer")

    async def readexactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not await self._more():
                raise EOFError("the service closed the connection mid-answer")
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    async def readall(self) -> bytes:
        while await self._more():
            pass
        out = bytes(self._buf)
        self._buf.clear()
        return out


async def _read_response(reader: _SockReader) -> Response:
    """Reads one HTTP/1.1 answer: status line, headers, body."""
    line = await reader.readline()
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP answer: {line[:100]!r}")
    status = int(parts[1])
    headers: Dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line == b"\r\n":
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if status in (204, 304) or 100 <= status < 200:
        return Response(status, headers, b"")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readline()) != b"\r\n":  # trailers
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return Response(status, headers, b"".join(chunks))
    if "content-length" in headers:
        return Response(status, headers, await reader.readexactly(int(headers["content-length"])))
    return Response(status, headers, await reader.readall())


def _split_host_port(addr: str) -> Tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ServiceUnavailable(f"service address tcp:{addr}: want tcp:HOST:PORT")
    return host.strip("[]"), int(port)
