"""The session API's calls, described once for both clients.

Each function returns a Call: the request (method, path, body), the
statuses that mean success, and how to decode the answer. Sandbox runs a
Call with the blocking client, AsyncSandbox with the asyncio one, so the
two cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union
from urllib.parse import quote

from ._http import AsyncClient, Client, Response, check
from .errors import BadRequest, NsboxError
from .results import Execution, FileInfo, Result, SessionInfo, _pick

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    body: Optional[bytes]
    ok: Tuple[int, ...]
    decode: Callable[[Response], T]
    content_type: Optional[str] = None


def do(client: Client, c: "Call[T]") -> T:
    r = client.request(c.method, c.path, c.body, content_type=c.content_type)
    return c.decode(check(r, *c.ok))


async def ado(client: AsyncClient, c: "Call[T]") -> T:
    r = await client.request(c.method, c.path, c.body, content_type=c.content_type)
    return c.decode(check(r, *c.ok))


def _json_body(d: Mapping[str, Any]) -> bytes:
    return json.dumps(d).encode()


def _obj(r: Response) -> Dict[str, Any]:
    d = r.json()
    if not isinstance(d, dict):
        raise NsboxError(f"the service's answer is not a JSON object: {str(d)[:200]}", status=r.status)
    return d


def open_session(
    policy: str,
    timeout_per_cell: Optional[float],
    idle_timeout: Optional[float],
    labels: Optional[Mapping[str, str]],
) -> "Call[SessionInfo]":
    for name, v in (("timeout_per_cell", timeout_per_cell), ("idle_timeout", idle_timeout)):
        if v is not None and not v > 0:
            raise BadRequest(f"{name} {v!r}: must be a positive number of seconds")
    body: Dict[str, Any] = {"policy": policy}
    if timeout_per_cell is not None:
        body["timeout_per_cell"] = timeout_per_cell
    if idle_timeout is not None:
        body["idle_timeout"] = idle_timeout
    if labels:
        body["labels"] = dict(labels)
    return Call("POST", "/v1/sessions", _json_body(body), (201,), lambda r: _pick(SessionInfo, _obj(r)))


def run_cell(sid: str, code: str, timeout: Optional[float]) -> "Call[Execution]":
    if timeout is not None and not timeout > 0:
        raise BadRequest(f"timeout {timeout!r}: must be a positive number of seconds")
    body: Dict[str, Any] = {"code": code}
    if timeout is not None:
        body["timeout"] = timeout
    return Call(
        "POST",
        f"/v1/sessions/{quote(sid, safe='')}/cells",
        _json_body(body),
        (200,),
        lambda r: Execution.from_result(Result.from_dict(_obj(r))),
    )


def interrupt(sid: str) -> "Call[bool]":
    return Call(
        "POST", f"/v1/sessions/{quote(sid, safe='')}/interrupt", b"", (200,), lambda r: bool(_obj(r)["interrupted"])
    )


def info(sid: str) -> "Call[SessionInfo]":
    return Call("GET", f"/v1/sessions/{quote(sid, safe='')}", None, (200,), lambda r: _pick(SessionInfo, _obj(r)))


def close(sid: str) -> "Call[Result]":
    return Call("DELETE", f"/v1/sessions/{quote(sid, safe='')}", None, (200,), lambda r: Result.from_dict(_obj(r)))


def _file_path(sid: str, path: str) -> str:
    """The URL of a workspace path. A path the service would refuse is
    refused here: HTTP clean-up would otherwise turn ".." into another
    URL, not an error."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise BadRequest(f"workspace path {path!r}: want a path relative to /workspace, without '..', '.' or '//'")
    return f"/v1/sessions/{quote(sid, safe='')}/files/{quote(path, safe='/')}"


def write_file(sid: str, path: str, data: Union[bytes, str], mode: Optional[int]) -> "Call[None]":
    url = _file_path(sid, path)
    if mode is not None:
        if not 0 < mode <= 0o777:
            raise BadRequest(f"mode {mode:#o}: permission bits only, 1 to 0777")
        url += f"?mode={mode:o}"
    body = data.encode() if isinstance(data, str) else bytes(data)
    return Call("PUT", url, body, (204,), lambda r: None, "application/octet-stream")


def read_file(sid: str, path: str) -> "Call[bytes]":
    return Call("GET", _file_path(sid, path), None, (200,), lambda r: r.body)


def list_files(sid: str, dir: str) -> "Call[List[FileInfo]]":
    url = f"/v1/sessions/{quote(sid, safe='')}/files"
    if dir:
        _file_path(sid, dir)  # the same checks
        url += "?dir=" + quote(dir, safe="/")
    return Call("GET", url, None, (200,), lambda r: [_pick(FileInfo, f) for f in _obj(r).get("files") or []])


def remove_file(sid: str, path: str) -> "Call[None]":
    return Call("DELETE", _file_path(sid, path), None, (204,), lambda r: None)
