"""A LangChain tool that runs a model's Python code in nsbox.

    from nsbox.integrations.langchain import NsboxPythonTool
    with NsboxPythonTool() as tool:            # one session, closed at the end
        tool.invoke({"code": "x = 6 * 7"})
        print(tool.invoke({"code": "print(x)"}))   # status: ok ... 42

By default the tool keeps one nsbox session (a `Sandbox`), opened on the
first call: variables, imports and /workspace persist from call to call, as
in a notebook. `persistent=False` runs every call in a fresh sandbox
(`nsbox.run`). Pass `sandbox=` to use a session of your own (the tool then
never closes it).

The model reads text (`nsbox.tools.describe`): the status, stdout, stderr,
the error, and that a chart was produced. The tool answers as
`content_and_artifact`: the artifact of the ToolMessage (kept by LangChain,
not sent to the model) is a dict with the PNG bytes of the charts (`images`),
the HTML tables (`html`) and the SDK's Execution or Result (`result`).

Needs `langchain-core`; imported only when this module is.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple, Type

try:
    from langchain_core.tools import BaseTool
    from pydantic import BaseModel, Field, PrivateAttr
except ImportError as e:  # the framework is optional
    raise ImportError(
        "nsbox.integrations.langchain needs langchain-core: pip install langchain-core"
    ) from e

from ..errors import SessionNotFound
from ..tools import DEFAULT_MAX_CHARS, describe, session_over, tool_schema

__all__ = ["NsboxPythonTool", "CodeInput"]


class CodeInput(BaseModel):
    """The tool's one argument."""

    code: str = Field(description="The Python source to run, as a complete program or cell (not a file name).")


def _description(persistent: bool) -> str:
    return str(tool_schema("json", persistent=persistent)["description"])


class NsboxPythonTool(BaseTool):
    """Run Python in an nsbox sandbox; a session by default, so state persists.

    policy: the nsbox policy the sandbox runs under ("datasci": numpy,
    pandas, matplotlib). persistent: one session for all calls (True) or a
    fresh sandbox per call (False). timeout: seconds per call (a session's
    timeout_per_cell), at most the policy's. sandbox: a session of your own
    to run the calls in (not closed by the tool).
    """

    name: str = "python"
    description: str = ""
    args_schema: Type[BaseModel] = CodeInput
    response_format: str = "content_and_artifact"  # type: ignore[assignment]

    policy: str = "datasci"
    persistent: bool = True
    timeout: Optional[float] = None
    idle_timeout: Optional[float] = None
    max_chars: int = DEFAULT_MAX_CHARS
    sandbox: Optional[Any] = None

    _own: Optional[Any] = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.description:
            self.description = _description(self.persistent or self.sandbox is not None)

    def _run(self, code: str, **_: Any) -> Tuple[str, Dict[str, Any]]:
        if self.sandbox is None and not self.persistent:
            from .. import run

            result = run(code, policy=self.policy, timeout=self.timeout)
            return describe(result, max_chars=self.max_chars), _artifact(result)
        with self._lock:  # a session runs one cell at a time
            return self._run_cell(code)

    def _run_cell(self, code: str) -> Tuple[str, Dict[str, Any]]:
        note = ""
        if self.sandbox is not None:
            sb = self.sandbox
        else:
            if self._own is None:
                self._own = self._open()
            sb = self._own
        try:
            if sb.closed:
                raise SessionNotFound("it was closed")
            ex = sb.run_code(code)
        except SessionNotFound as e:
            if sb is self.sandbox:  # not ours to reopen
                text = (
                    f"status: session_ended\nThe session has ended ({e.message}): its variables, imports and "
                    "files are gone, and the code was not run."
                )
                return text, {"images": [], "html": [], "result": None}
            # Ours ended (its idle timeout, a memory kill): start afresh and say so.
            self._own = self._open()
            sb = self._own
            note = "(The previous session had ended; this code ran in a new one: earlier variables are gone.)\n"
            ex = sb.run_code(code)
        ended = session_over(sb, ex)
        if ended and sb is self._own:
            self._drop()  # the next call opens a new session
        return note + describe(ex, max_chars=self.max_chars, session_ended=ended), _artifact(ex)

    def _open(self) -> Any:
        from .. import Sandbox

        kwargs: Dict[str, Any] = {"policy": self.policy}
        if self.timeout is not None:
            kwargs["timeout_per_cell"] = self.timeout
        if self.idle_timeout is not None:
            kwargs["idle_timeout"] = self.idle_timeout
        return Sandbox(**kwargs)

    def _drop(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            try:
                own.close()
            except SessionNotFound:
                pass  # already gone: nothing left to close

    def close(self) -> None:
        """Close the tool's own session, if it opened one (not a sandbox= given to it)."""
        with self._lock:
            self._drop()

    def __enter__(self) -> "NsboxPythonTool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _artifact(outcome: Any) -> Dict[str, Any]:
    outputs = getattr(outcome, "outputs", None) or []
    images: List[bytes] = [o.png for o in outputs if getattr(o, "png", None)]
    html: List[str] = [o.html for o in outputs if getattr(o, "html", None)]
    return {"images": images, "html": html, "result": outcome}
