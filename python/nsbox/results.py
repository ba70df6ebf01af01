"""What runs and cells return: typed views of the result object.

The fields mirror docs/result.schema.json (docs/result-schema.md says what
each means); the service's answers add outputs, files and, for a session
cell, exception. Decoding is lenient about fields it does not know (a newer
service may add some) and keeps the whole object in `raw`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

# The statuses of docs/result-schema.md.
OK = "ok"
ERROR = "error"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
KILLED = "killed"
POLICY_VIOLATION = "policy_violation"
SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class Output:
    """One display output: a final bare expression's value, a matplotlib
    figure, a pandas table. type is its MIME type; data is text, or
    base64 for image/png (png gives the bytes)."""

    type: str
    data: str

    @property
    def png(self) -> Optional[bytes]:
        """The PNG bytes of an image/png output, else None."""
        return base64.b64decode(self.data) if self.type == "image/png" else None

    @property
    def html(self) -> Optional[str]:
        """The HTML of a text/html output (a DataFrame), else None."""
        return self.data if self.type == "text/html" else None

    @property
    def text(self) -> Optional[str]:
        """The text of a text/plain output (an expression's repr), else None."""
        return self.data if self.type == "text/plain" else None


@dataclass(frozen=True)
class Violation:
    """What the Python policy layer refused or recorded."""

    kind: str
    name: str
    line: int = 0
    col: int = 0
    detail: str = ""


@dataclass(frozen=True)
class StepError:
    """The sandbox setup step that failed (status sandbox_error)."""

    step: str
    message: str
    errno: Optional[str] = None


@dataclass(frozen=True)
class CellError:
    """The uncaught exception of a program or cell: the program's word,
    reported as data, never raised."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class FileInfo:
    """A workspace entry: a run's collected file (type "file", no mode) or
    an entry of a session's files.list() (type file, dir, symlink or
    other; mode its permission bits)."""

    path: str
    size: int
    type: str = "file"
    mode: Optional[int] = None


@dataclass(frozen=True)
class Phase:
    name: str
    ms: float


@dataclass(frozen=True)
class Limits:
    """The run's effective limits (the policy's, narrowed by the request)."""

    timeout_ms: int
    cpu_time_ms: int
    output_bytes: int
    memory_bytes: Optional[int]
    pids: Optional[int]
    cpus: Optional[float]
    open_files: int
    file_size_bytes: int
    stack_bytes: int
    tmp_bytes: int
    shm_bytes: int
    workspace_bytes: Optional[int]
    workspace_inodes: Optional[int]


@dataclass(frozen=True)
class SandboxInfo:
    """The protections that were active."""

    namespaces: List[str]
    cgroup: str
    seccomp: str
    landlock_abi: int
    memfd_noexec: str
    rootless: bool = False
    host_ids: str = "own"


@dataclass(frozen=True)
class Connection:
    """One connection the program opened to nsbox's proxy (network
    allowlist mode, docs/network.md)."""

    host: str
    port: int
    method: str
    address: str
    allowed: bool
    reason: str
    bytes_sent: int
    bytes_received: int
    start_ms: int
    duration_ms: int


@dataclass(frozen=True)
class NetworkInfo:
    """What a run in network allowlist mode did through the proxy."""

    mode: str
    proxy: str
    connections: List[Connection]
    connections_dropped: int
    refused: int
    bytes_sent: int
    bytes_received: int


@dataclass(frozen=True)
class Result:
    """The result of a run (nsbox.run) or of a session cell, as
    docs/result-schema.md describes each field. ok is True when the
    program ran to the end and exited 0."""

    schema: int
    id: str
    status: str
    exit_code: Optional[int]
    signal: Optional[int]
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int
    cpu_ms: Optional[int]
    peak_memory_bytes: Optional[int]
    policy: str
    limits: Optional[Limits]
    sandbox: Optional[SandboxInfo]
    limits_reached: List[str] = field(default_factory=list)
    violations: List[Violation] = field(default_factory=list)
    reason: Optional[str] = None
    limit: Optional[str] = None
    error: Optional[StepError] = None
    outputs: List[Output] = field(default_factory=list)
    outputs_truncated: bool = False
    exception: Optional[CellError] = None
    files: Optional[List[FileInfo]] = None
    phases: Optional[List[Phase]] = None
    network: Optional[NetworkInfo] = None
    stdout_bytes: Optional[bytes] = None
    stderr_bytes: Optional[bytes] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Result":
        """Decodes a result object (nsbox run --json, POST /v1/runs, a cell)."""
        try:
            limits = d.get("limits")
            sb = d.get("sandbox")
            err = d.get("error")
            exc = d.get("exception")
            files = d.get("files")
            phases = d.get("phases")
            net = d.get("network")
            return cls(
                schema=int(d["schema"]),
                id=str(d["id"]),
                status=str(d["status"]),
                exit_code=d.get("exit_code"),
                signal=d.get("signal"),
                stdout=str(d.get("stdout", "")),
                stderr=str(d.get("stderr", "")),
                stdout_truncated=bool(d.get("stdout_truncated", False)),
                stderr_truncated=bool(d.get("stderr_truncated", False)),
                duration_ms=int(d.get("duration_ms", 0)),
                cpu_ms=d.get("cpu_ms"),
                peak_memory_bytes=d.get("peak_memory_bytes"),
                policy=str(d.get("policy", "")),
                limits=_pick(Limits, limits) if limits else None,
                sandbox=_pick(SandboxInfo, sb) if sb else None,
                limits_reached=list(d.get("limits_reached") or []),
                violations=[_pick(Violation, v) for v in d.get("violations") or []],
                reason=d.get("reason"),
                limit=d.get("limit"),
                error=_pick(StepError, err) if err else None,
                outputs=[_pick(Output, o) for o in d.get("outputs") or []],
                outputs_truncated=bool(d.get("outputs_truncated", False)),
                exception=_pick(CellError, exc) if exc else None,
                files=[_pick(FileInfo, f) for f in files] if files is not None else None,
                phases=[_pick(Phase, p) for p in phases] if phases is not None else None,
                network=_network(net) if net else None,
                stdout_bytes=_b64(d.get("stdout_base64")),
                stderr_bytes=_b64(d.get("stderr_base64")),
                raw=dict(d),
            )
        except (KeyError, TypeError, ValueError) as e:
            from .errors import NsboxError

            raise NsboxError(f"not a result object ({type(e).__name__}: {e}): {str(dict(d))[:200]}") from e


@dataclass(frozen=True)
class Execution:
    """The result of one session cell (Sandbox.run_code).

    error is the cell's uncaught exception (name, value, traceback) as
    data, never raised; sandbox_error is the setup step that failed when
    the status is sandbox_error. result holds every field of the cell's
    result object."""

    id: str
    status: str
    stdout: str
    stderr: str
    outputs: List[Output]
    error: Optional[CellError]
    reason: Optional[str]
    limit: Optional[str]
    exit_code: Optional[int]
    duration_ms: int
    cpu_ms: Optional[int]
    peak_memory_bytes: Optional[int]
    stdout_truncated: bool
    stderr_truncated: bool
    outputs_truncated: bool
    violations: List[Violation]
    sandbox_error: Optional[StepError]
    result: Result = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def text(self) -> Optional[str]:
        """The text/plain value of the cell's final bare expression, if any."""
        for o in self.outputs:
            if o.type == "text/plain":
                return o.data
        return None

    @property
    def pngs(self) -> List[bytes]:
        """The PNG bytes of every image output, in order."""
        return [o.png for o in self.outputs if o.png is not None]

    @property
    def htmls(self) -> List[str]:
        """Every text/html output, in order."""
        return [o.data for o in self.outputs if o.type == "text/html"]

    @classmethod
    def from_result(cls, r: Result) -> "Execution":
        return cls(
            id=r.id,
            status=r.status,
            stdout=r.stdout,
            stderr=r.stderr,
            outputs=r.outputs,
            error=r.exception,
            reason=r.reason,
            limit=r.limit,
            exit_code=r.exit_code,
            duration_ms=r.duration_ms,
            cpu_ms=r.cpu_ms,
            peak_memory_bytes=r.peak_memory_bytes,
            stdout_truncated=r.stdout_truncated,
            stderr_truncated=r.stderr_truncated,
            outputs_truncated=r.outputs_truncated,
            violations=r.violations,
            sandbox_error=r.error,
            result=r,
        )


@dataclass(frozen=True)
class SessionInfo:
    """An open session, as GET /v1/sessions/{id} describes it."""

    id: str
    policy: str
    created: str
    cells: int = 0
    running: bool = False
    ended: bool = False


def _pick(cls: Any, d: Mapping[str, Any]) -> Any:
    """cls built from the keys of d it has fields for (a newer service's
    extra keys are ignored)."""
    names = cls.__dataclass_fields__
    return cls(**{k: v for k, v in d.items() if k in names})


def _b64(s: Optional[str]) -> Optional[bytes]:
    return base64.b64decode(s) if s else None


def _network(d: Mapping[str, Any]) -> NetworkInfo:
    """The network section of a result, its connections decoded."""
    fields = dict(d)
    fields["connections"] = [_pick(Connection, c) for c in d.get("connections") or []]
    return _pick(NetworkInfo, fields)
