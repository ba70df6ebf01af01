"""nsbox.run and nsbox.arun: one program in a fresh sandbox.

Through the service when one is configured (an explicit server,
NSBOX_SERVER, the default socket) or this process's private service
already runs; else through the nsbox binary, `nsbox run --json`, as a
subprocess. Either way the answer is the same result object.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _private
from ._discover import configured, find_binary
from ._http import AsyncClient, Client, Endpoint
from .errors import BadRequest, NsboxError
from .results import Result

FileData = Union[bytes, str]


def run(
    code: str,
    *,
    policy: str = "default",
    timeout: Optional[float] = None,
    output_limit: Optional[int] = None,
    network: Optional[str] = None,
    files: Optional[Mapping[str, FileData]] = None,
    labels: Optional[Mapping[str, str]] = None,
    stdin: Optional[FileData] = None,
    server: Optional[str] = None,
    token: Optional[str] = None,
) -> Result:
    """Runs code in a fresh sandbox under policy and returns its Result.

    timeout (seconds) and output_limit (bytes per stream) can only lower
    the policy's; network="none" turns a policy's network allowlist off
    for this run (nothing widens it); files ({path: bytes or str}) are placed in /workspace
    first; labels are recorded in the audit log; stdin (bytes, or str as
    UTF-8) is the program's standard input, then end of input (none: at
    EOF; at most 64 MiB). server ("unix:PATH" or
    "tcp:HOST:PORT") and token choose a service explicitly. The program's
    failure is in the Result (status, exit_code, stderr); errors are
    raised only when no run could be attempted."""
    _check_args(timeout, output_limit, network)
    ep = _endpoint(server, token)
    if ep is not None:
        payload = _payload(code, policy, timeout, output_limit, network, files, labels, stdin)
        return _result(Client(ep).json("POST", "/v1/runs", payload, 200))
    argv, ws = _argv(find_binary(), policy, timeout, output_limit, network, files, labels)
    fd: Optional[int] = None
    try:
        fd = _stdin_fd(stdin, argv)
        p = subprocess.run(
            argv, input=code.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=_fds(fd)
        )
    except OSError as e:
        raise NsboxError(f"run {argv[0]}: {e}") from e
    finally:
        _cleanup(ws, fd)
    return _decode(argv[0], p.returncode, p.stdout, p.stderr)


async def arun(
    code: str,
    *,
    policy: str = "default",
    timeout: Optional[float] = None,
    output_limit: Optional[int] = None,
    network: Optional[str] = None,
    files: Optional[Mapping[str, FileData]] = None,
    labels: Optional[Mapping[str, str]] = None,
    stdin: Optional[FileData] = None,
    server: Optional[str] = None,
    token: Optional[str] = None,
) -> Result:
    """run() as a coroutine: the service over asyncio streams, or nsbox
    as an asyncio subprocess. Cancelling it stops the run (the service
    sees its client go away; the subprocess is sent SIGTERM)."""
    _check_args(timeout, output_limit, network)
    ep = _endpoint(server, token)
    if ep is not None:
        payload = _payload(code, policy, timeout, output_limit, network, files, labels, stdin)
        return _result(await AsyncClient(ep).json("POST", "/v1/runs", payload, 200))
    argv, ws = _argv(find_binary(), policy, timeout, output_limit, network, files, labels)
    fd: Optional[int] = None
    try:
        fd = _stdin_fd(stdin, argv)
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=_fds(fd)
        )
        try:
            out, err = await proc.communicate(code.encode())
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.terminate()  # nsbox kills the run and finishes its row
                await proc.wait()
            raise
    except OSError as e:
        raise NsboxError(f"run {argv[0]}: {e}") from e
    finally:
        _cleanup(ws, fd)
    assert proc.returncode is not None
    return _decode(argv[0], proc.returncode, out, err)


def _endpoint(server: Optional[str], token: Optional[str]) -> Optional[Endpoint]:
    return configured(server, token) or _private.running()


def _check_args(timeout: Optional[float], output_limit: Optional[int], network: Optional[str]) -> None:
    if timeout is not None and not timeout > 0:
        raise BadRequest(f"timeout {timeout!r}: must be a positive number of seconds")
    if output_limit is not None and not output_limit > 0:
        raise BadRequest(f"output_limit {output_limit!r}: must be a positive number of bytes")
    if network not in (None, "none"):
        raise BadRequest(f"network {network!r}: only 'none' turns the policy's network off; nothing widens it")


def _payload(
    code: str,
    policy: str,
    timeout: Optional[float],
    output_limit: Optional[int],
    network: Optional[str],
    files: Optional[Mapping[str, FileData]],
    labels: Optional[Mapping[str, str]],
    stdin: Optional[FileData],
) -> Dict[str, Any]:
    """The body of POST /v1/runs."""
    p: Dict[str, Any] = {"code": code, "policy": policy}
    if timeout is not None:
        p["timeout"] = timeout
    if output_limit is not None:
        p["output_limit"] = output_limit
    if network is not None:
        p["network"] = network
    if labels:
        p["labels"] = dict(labels)
    if files:
        p["files"] = [
            {"path": path, "content_base64": base64.b64encode(_bytes(data)).decode()} for path, data in files.items()
        ]
    if stdin is not None:
        p["stdin_base64"] = base64.b64encode(_bytes(stdin)).decode()
    return p


def _result(d: Any) -> Result:
    if not isinstance(d, dict):
        raise NsboxError(f"the service's answer is not a result object: {str(d)[:200]}")
    return Result.from_dict(d)


def _argv(
    binary: str,
    policy: str,
    timeout: Optional[float],
    output_limit: Optional[int],
    network: Optional[str],
    files: Optional[Mapping[str, FileData]],
    labels: Optional[Mapping[str, str]],
) -> Tuple[List[str], Optional[str]]:
    """nsbox run's command line (the program on stdin, "-" last), and the
    temporary workspace holding files, if any, for the caller to remove."""
    argv = [binary, "run", "--json", "--policy=" + policy]
    if timeout is not None:
        argv.append(f"--timeout={timeout:f}s")
    if output_limit is not None:
        argv.append(f"--output-limit={output_limit}")
    if network is not None:
        argv.append(f"--network={network}")
    for k, v in (labels or {}).items():
        argv.append(f"--label={k}={v}")
    ws = _workspace(files) if files else None
    if ws:
        argv.append("--workspace=" + os.path.join(ws, "workspace"))
    argv.append("-")
    return argv, ws


def _stdin_fd(stdin: Optional[FileData], argv: List[str]) -> Optional[int]:
    """A memfd holding the program's input, named by --stdin in argv
    (before its last "-"): a regular file, as nsbox wants, while nsbox's
    own stdin carries the program. None for no input. The caller passes
    it to nsbox and closes it (_cleanup)."""
    if stdin is None:
        return None
    fd = os.memfd_create("nsbox-stdin", os.MFD_CLOEXEC)
    try:
        data = memoryview(_bytes(stdin))
        while data:
            data = data[os.write(fd, data) :]
    except BaseException:
        os.close(fd)
        raise
    argv.insert(len(argv) - 1, f"--stdin=/dev/fd/{fd}")
    return fd


def _fds(fd: Optional[int]) -> Tuple[int, ...]:
    return () if fd is None else (fd,)


def _cleanup(ws: Optional[str], fd: Optional[int]) -> None:
    if ws:
        shutil.rmtree(ws, ignore_errors=True)
    if fd is not None:
        os.close(fd)


def _workspace(files: Mapping[str, FileData]) -> str:
    """A temporary --workspace with files in it. The directory belongs to
    root (the caller), so nsbox needs it writable by others to let the
    program write there (docs/running.md); its parent is private (0700),
    so no one else on the host reaches it, and nsbox binds it without
    needing the program to search the parent."""
    top = tempfile.mkdtemp(prefix="nsbox-run-")
    ws = os.path.join(top, "workspace")
    try:
        os.mkdir(ws)
        os.chmod(ws, 0o777)
        for path, data in files.items():
            dst = _beneath(ws, path)
            os.makedirs(os.path.dirname(dst), mode=0o777, exist_ok=True)
            with open(dst, "wb") as f:
                f.write(_bytes(data))
            os.chmod(dst, 0o644)
    except BaseException:
        shutil.rmtree(top, ignore_errors=True)
        raise
    return top


def _beneath(root: str, path: str) -> str:
    """root/path for a relative path without "..", as the service
    requires of a file's path."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise BadRequest(f"file {path!r}: want a relative path without '..', '.' or empty parts")
    return os.path.join(root, *parts)


def _bytes(data: FileData) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def _decode(binary: str, code: int, out: bytes, err: bytes) -> Result:
    """The result nsbox run --json printed; an error when it printed none."""
    try:
        d = json.loads(out)
    except ValueError:
        msg = err.decode("utf-8", "replace").strip() or out[:500].decode("utf-8", "replace")
        raise NsboxError(f"{binary} run --json exited {code} without a result: {msg}") from None
    return _result(d)
