"""The errors the SDK raises.

Every error is an NsboxError carrying the service's message and, when an
HTTP answer caused it, its status and the service's error code
(docs/api.md, "Errors"). A program's own failure is never raised: a run's
Result and a cell's Execution report it as data (status, exception).
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class NsboxError(Exception):
    """Base of every error the SDK raises.

    message: what went wrong, as the service (or the SDK) said it.
    status: the HTTP status of the service's answer, or None when no
    answer caused the error (no service, a binary that failed).
    code: the service's error code (e.g. "policy_refused"), or None.
    """

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def __str__(self) -> str:
        if self.status is None:
            return self.message
        if self.code:
            return f"{self.message} ({self.code}, HTTP {self.status})"
        return f"{self.message} (HTTP {self.status})"


class ServiceUnavailable(NsboxError):
    """No service could be reached or started, or no nsbox binary was
    found; the message says what to do."""


class BadRequest(NsboxError):
    """400: the request was malformed or asked more than the policy
    allows (bad_request, session_refused, path_refused)."""


class Unauthorized(NsboxError):
    """401: a TCP service wants a bearer token (NSBOX_TOKEN or
    NSBOX_TOKEN_FILE), and it was missing or wrong."""


class PolicyRefused(NsboxError):
    """403: the service does not serve the policy asked for."""


class SessionNotFound(NsboxError):
    """404 no_session or 410 session_ended: the session is closed (by
    close(), its idle timeout, a cell that ended it, a service that
    stopped) or never existed."""


class FileNotFound(NsboxError):
    """404 no_file: no such file or directory in the session's workspace."""


class Conflict(NsboxError):
    """409: another cell of the session is running (cell_running), or the
    path is not what the call needs (not_a_file)."""


class LimitExceeded(NsboxError):
    """413 or 429: a body, cell or file too large, or too many runs or
    sessions at once. retry_after is the service's Retry-After in seconds
    (429), else None."""

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after


class SandboxFailed(NsboxError):
    """500: the service could not build a session's sandbox."""


# The class for each of the service's error codes; a code not listed
# falls back to its status (_BY_STATUS), then to NsboxError.
_BY_CODE: Dict[str, Type[NsboxError]] = {
    "bad_request": BadRequest,
    "session_refused": BadRequest,
    "path_refused": BadRequest,
    "unauthorized": Unauthorized,
    "policy_refused": PolicyRefused,
    "no_session": SessionNotFound,
    "session_ended": SessionNotFound,
    "no_file": FileNotFound,
    "cell_running": Conflict,
    "not_a_file": Conflict,
    "body_too_large": LimitExceeded,
    "cell_too_large": LimitExceeded,
    "file_too_large": LimitExceeded,
    "too_many_runs": LimitExceeded,
    "too_many_sessions": LimitExceeded,
    "sandbox_error": SandboxFailed,
}

_BY_STATUS: Dict[int, Type[NsboxError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: PolicyRefused,
    409: Conflict,
    413: LimitExceeded,
    429: LimitExceeded,
    500: SandboxFailed,
}


def from_response(status: int, code: Optional[str], message: str, retry_after: Optional[float] = None) -> NsboxError:
    """The typed error for a service's error answer."""
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or NsboxError
    if cls is LimitExceeded:
        return LimitExceeded(message, status=status, code=code, retry_after=retry_after)
    return cls(message, status=status, code=code)
