"""nsbox: run untrusted Python in a Linux sandbox, from Python.

The public API (docs/python.md has the guide):

    nsbox.run(code, *, policy="default", timeout=None, output_limit=None, network=None,
              files=None, labels=None, stdin=None, server=None, token=None) -> Result
        One program in a fresh sandbox. Through the service when one is
        configured (server=, NSBOX_SERVER, or /run/nsbox/nsbox.sock) or this
        process's private service runs; else `nsbox run --json` as a
        subprocess. files: {path: bytes | str} placed in /workspace;
        stdin: bytes | str, the program's standard input.
    await nsbox.arun(...)  -> Result            the same, as a coroutine

    Result       the result object (docs/result-schema.md): .ok, .status,
                 .exit_code, .stdout, .stderr, .reason, .limit, .outputs,
                 .violations, .error (StepError), .exception (CellError),
                 .files, .limits, .sandbox, .duration_ms, ..., .raw (dict)
    Output       .type (MIME), .data; .png -> bytes | None, .html, .text

    Sandbox(policy="datasci", *, timeout_per_cell=None, idle_timeout=None,
            labels=None, server=None, token=None)
        A session (context manager). With no service configured and the
        caller root, a private `nsbox serve` is started on a temporary
        socket, shared by the process, stopped at exit.
        .id, .policy, .created, .closed
        .run_code(code, *, timeout=None) -> Execution
        .interrupt() -> bool
        .info() -> SessionInfo
        .close() -> Result | None        (the session's own result)
        .files.write(path, data: bytes | str, *, mode=None) -> None
        .files.read(path) -> bytes
        .files.list(dir="") -> list[FileInfo]   (.path .type .size .mode)
        .files.remove(path) -> None
    AsyncSandbox(...)   the same methods as coroutines; `async with`, or
                        `await AsyncSandbox.create(...)`; .files likewise

    Execution    one cell: .ok, .status, .stdout, .stderr, .outputs,
                 .error (CellError: .name .value .traceback, or None: a
                 cell's exception is data, never raised), .reason, .limit,
                 .duration_ms, .pngs, .htmls, .text, .result (Result)

    Errors (nsbox.errors; each has .message, .status, .code):
        NsboxError
        ├── ServiceUnavailable   no service, none can be started, no binary
        ├── BadRequest           400 (bad_request, session_refused, path_refused)
        ├── Unauthorized         401
        ├── PolicyRefused        403
        ├── SessionNotFound      404 no_session, 410 session_ended
        ├── FileNotFound         404 no_file
        ├── Conflict             409 (cell_running, not_a_file)
        ├── LimitExceeded        413, 429 (.retry_after)
        └── SandboxFailed        500

    nsbox.find_binary() -> str   the nsbox binary the SDK runs
    nsbox.stop_private_service() stops the private service now (else at exit)
"""

from __future__ import annotations

from ._discover import find_binary
from ._private import stop as stop_private_service
from ._run import arun, run
from .aio import AsyncFiles, AsyncSandbox
from .errors import (
    BadRequest,
    Conflict,
    FileNotFound,
    LimitExceeded,
    NsboxError,
    PolicyRefused,
    SandboxFailed,
    ServiceUnavailable,
    SessionNotFound,
    Unauthorized,
)
from .results import (
    CellError,
    Connection,
    Execution,
    FileInfo,
    Limits,
    NetworkInfo,
    Output,
    Phase,
    Result,
    SandboxInfo,
    SessionInfo,
    StepError,
    Violation,
)
from .sandbox import Files, Sandbox
from .tools import handle_tool_call, tool_schema


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return "unknown"
    try:
        return version("nsbox")
    except PackageNotFoundError:
        return "unknown"


__version__ = _version()

__all__ = [
    "AsyncFiles",
    "AsyncSandbox",
    "BadRequest",
    "CellError",
    "Conflict",
    "Connection",
    "Execution",
    "FileInfo",
    "FileNotFound",
    "Files",
    "LimitExceeded",
    "Limits",
    "NetworkInfo",
    "NsboxError",
    "Output",
    "Phase",
    "PolicyRefused",
    "Result",
    "SandboxFailed",
    "SandboxInfo",
    "Sandbox",
    "ServiceUnavailable",
    "SessionInfo",
    "SessionNotFound",
    "StepError",
    "Unauthorized",
    "Violation",
    "__version__",
    "arun",
    "find_binary",
    "handle_tool_call",
    "run",
    "stop_private_service",
    "tool_schema",
]
