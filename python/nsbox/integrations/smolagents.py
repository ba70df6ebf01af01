"""A smolagents executor that runs every step of a CodeAgent in an nsbox session.

    from smolagents import CodeAgent
    from nsbox.integrations.smolagents import NsboxExecutor
    with CodeAgent(tools=[], model=model, executor=NsboxExecutor(policy="datasci")) as agent:
        agent.run("What is the mean of 1..10?")   # every step is a cell of one session

`CodeAgent(executor=...)` takes any smolagents `PythonExecutor`; this is one.
Its session is opened on first use and closed by `agent.cleanup()` (or the
agent's `with`). State persists from step to step (and from one `run` to the
next): variables, imports, /workspace.

Tools run inside the sandbox, never on the host. As smolagents' own remote
executors do, each tool's source is sent into the session and the tool runs
there, under the sandbox's policy: no network, the policy's imports only. A
tool whose source cannot be sent (it is not self-contained), whose code the
policy refuses (it imports `requests`, say), or a managed agent (it runs on
the host) is refused when the agent starts, with an `NsboxToolRefused` that
names it: a host tool is never reachable from the sandbox.

`final_answer(x)` ends the step with the answer: x crosses back as JSON (a
value that is not JSON comes back as its repr). Variables given to `run`
(`additional_args`) cross in as JSON, and a value that is not is refused.

What the model reads after a step is smolagents' observation: stdout, then
stderr and the charts produced, and the value of the last expression (its
repr). A failed step (an exception, a timeout, a refused import) raises, and
smolagents shows the model the error, the traceback and what was printed.

Needs `smolagents`; imported only when this module is.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, List, Optional

try:
    from smolagents.local_python_executor import CodeOutput, PythonExecutor
    from smolagents.tools import Tool, get_tools_definition_code
except ImportError as e:  # the framework is optional
    raise ImportError("nsbox.integrations.smolagents needs smolagents: pip install smolagents") from e

from ..errors import NsboxError, SessionNotFound
from ..tools import describe, session_over

__all__ = ["NsboxExecutor", "NsboxToolRefused", "NsboxStepFailed"]

# The exception final_answer raises inside the sandbox, by name: a cell's
# exception comes back as {name, value, traceback}.
_FINAL = "NsboxFinalAnswer"

# Defined in the session before the tools: the exception, and the encoding
# of the answer (JSON, else the repr). Imports only json: the policy's
# static check reads every import of a cell.
_PRELUDE = f'''
import json as _nsbox_json

class {_FINAL}(BaseException):
    """Raised by final_answer: the step's answer, as JSON."""

def _nsbox_encode(value):
    try:
        return _nsbox_json.dumps({{"json": value}})
    except (TypeError, ValueError):
        return _nsbox_json.dumps({{"repr": repr(value)}})
'''

# Wraps the final_answer tool sent above: its own forward runs (a custom
# one may check the answer), then the answer leaves the step.
_WRAP_FINAL = f'''
_nsbox_final_answer_tool = final_answer

def final_answer(*args, **kwargs):
    raise {_FINAL}(_nsbox_encode(_nsbox_final_answer_tool(*args, **kwargs)))
'''

_DEFAULT_FINAL = f'''
def final_answer(answer):
    raise {_FINAL}(_nsbox_encode(answer))
'''


class NsboxToolRefused(NsboxError):
    """A tool (or managed agent) that cannot run inside the sandbox."""


class NsboxStepFailed(Exception):
    """A step's code failed in the sandbox; the message is what the model reads."""


class NsboxExecutor(PythonExecutor):
    """A smolagents PythonExecutor backed by one nsbox session.

    policy, timeout_per_cell, idle_timeout: the session's (nsbox.Sandbox).
    sandbox: a session of your own to run the steps in (not closed by
    cleanup()). The agent's additional_authorized_imports do not widen what
    the sandbox allows: its policy decides the imports.
    """

    def __init__(
        self,
        *,
        policy: str = "datasci",
        timeout_per_cell: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        sandbox: Optional[Any] = None,
    ) -> None:
        self.policy = policy
        self.timeout_per_cell = timeout_per_cell
        self.idle_timeout = idle_timeout
        self._given = sandbox
        self._own: Optional[Any] = None
        # What a new session must be given again, in order: the prelude and
        # tools, then the variables.
        self._setup: List[str] = []
        self._variables: Optional[str] = None
        # Why our session ended, until the next step says so to the model.
        self._lost: Optional[str] = None

    # -- smolagents' PythonExecutor -------------------------------------------------

    def send_tools(self, tools: Dict[str, Any]) -> None:
        """Define the tools in the session, or refuse those that cannot run there."""
        sendable: Dict[str, Tool] = {}
        for name, tool in tools.items():
            if not isinstance(tool, Tool):
                raise NsboxToolRefused(
                    f"{name!r} is a managed agent ({type(tool).__name__}), not a tool: it runs on the host, and "
                    "the sandboxed code cannot call it; use NsboxExecutor without managed agents"
                )
            sendable[name] = tool
        try:
            definitions = get_tools_definition_code(sendable) if sendable else ""
        except Exception as e:  # smolagents' validation: a tool not self-contained
            raise NsboxToolRefused(
                f"a tool cannot be sent into the sandbox: {e}. Tools run inside the sandbox, so each "
                "must be self-contained (its imports inside its methods, no state from the host)"
            ) from e
        final = _WRAP_FINAL if "final_answer" in sendable else _DEFAULT_FINAL
        code = _PRELUDE + "\n" + definitions + "\n" + final
        sb = self._session()
        ex = sb.run_code(code)
        if str(ex.status) != "ok":
            names = ", ".join(sorted(sendable)) or "(none)"
            raise NsboxToolRefused(
                f"the tools ({names}) could not be defined in the sandbox under policy {sb.policy!r}; "
                "tools run inside it, with no network and only the policy's imports:\n" + describe(ex)
            )
        self._setup = [code]

    def send_variables(self, variables: Dict[str, Any]) -> None:
        """Set the agent's variables in the session, as JSON."""
        if not variables:
            return
        for key, value in variables.items():
            if not str(key).isidentifier():
                raise NsboxToolRefused(f"variable {key!r} is not a Python name and cannot be set in the sandbox")
            try:
                json.dumps(value)
            except (TypeError, ValueError) as e:
                raise NsboxToolRefused(
                    f"variable {key!r} ({type(value).__name__}) cannot cross into the sandbox: only JSON "
                    f"values do (str, numbers, booleans, None, lists, dicts): {e}"
                ) from e
        payload = json.dumps(variables)
        code = f"import json as _nsbox_json\nglobals().update(_nsbox_json.loads({payload!r}))\n"
        ex = self._session().run_code(code)
        if str(ex.status) != "ok":
            raise NsboxToolRefused("the variables could not be set in the sandbox:\n" + describe(ex))
        self._variables = code

    def __call__(self, code_action: str) -> CodeOutput:
        """Run one step: its logs, its output, and whether it gave the final answer."""
        note = ""
        if self._given is None and self._lost is not None:
            note = self._new_session_note(self._lost)
        sb = self._session()
        try:
            if sb.closed:
                raise SessionNotFound("it was closed")
            ex = sb.run_code(code_action)
        except SessionNotFound as e:
            if sb is self._given:
                raise NsboxStepFailed(f"The sandbox session has ended ({e.message}); the code was not run.") from e
            self._lost_session(e.message)
            note = self._new_session_note(e.message)
            sb = self._session()
            ex = sb.run_code(code_action)
        ended = session_over(sb, ex)
        if ended and self._given is None:
            self._lost_session(str(getattr(ex, "reason", "") or ex.status))
        logs = note + _logs(ex)
        if ended:
            logs += "(The sandbox session ended with this step: variables from earlier steps are gone.)\n"
        error = getattr(ex, "error", None)
        if error is not None and getattr(error, "name", "") == _FINAL:
            return CodeOutput(output=_decode(getattr(error, "value", "")), logs=logs, is_final_answer=True)
        if str(ex.status) != "ok" or error is not None:
            raise NsboxStepFailed(note + describe(ex, session_ended=ended))
        return CodeOutput(output=_output(ex), logs=logs, is_final_answer=False)

    def cleanup(self) -> None:
        """Close the executor's own session (CodeAgent.cleanup calls this)."""
        self._drop()

    # -- the session ----------------------------------------------------------------

    def _session(self) -> Any:
        """The session, opened on first use; a new one is given the tools and
        variables again."""
        if self._given is not None:
            return self._given
        if self._own is None:
            from .. import Sandbox

            kwargs: Dict[str, Any] = {"policy": self.policy}
            if self.timeout_per_cell is not None:
                kwargs["timeout_per_cell"] = self.timeout_per_cell
            if self.idle_timeout is not None:
                kwargs["idle_timeout"] = self.idle_timeout
            sb = Sandbox(**kwargs)
            for code in self._setup + ([self._variables] if self._variables else []):
                ex = sb.run_code(code)
                if str(ex.status) != "ok":
                    sb.close()
                    raise NsboxToolRefused("the tools or variables could not be set in a new session:\n" + describe(ex))
            self._own = sb
        return self._own

    def _lost_session(self, why: str) -> None:
        """Our session ended (why): the next step runs in a new one."""
        self._lost = why
        self._drop()

    def _new_session_note(self, why: str) -> str:
        self._lost = None
        return f"(The sandbox session had ended ({why}); this step ran in a new one: earlier variables are gone.)\n"

    def _drop(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            try:
                own.close()
            except SessionNotFound:
                pass  # already gone


def _logs(ex: Any) -> str:
    """The step's logs as smolagents shows them: stdout, then stderr and the charts."""
    parts = [getattr(ex, "stdout", "") or ""]
    stderr = getattr(ex, "stderr", "") or ""
    error = getattr(ex, "error", None)
    if error is not None and getattr(error, "name", "") == _FINAL:
        # final_answer's exception is the runner's report, not the program's stderr.
        tb = getattr(error, "traceback", "") or ""
        stderr = stderr.replace(tb, "") if tb else stderr
    if stderr.strip():
        parts.append("[stderr]\n" + stderr)
    charts = sum(1 for o in (getattr(ex, "outputs", None) or []) if getattr(o, "png", None))
    if charts:
        parts.append(f"[{charts} chart(s) produced as PNG]\n")
    return "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)


def _output(ex: Any) -> Any:
    """The last expression's value as the sandbox shows it: its repr, else a chart as an image."""
    outputs = getattr(ex, "outputs", None) or []
    for o in outputs:
        text = getattr(o, "text", None)
        if text:
            return text
    for o in outputs:
        png = getattr(o, "png", None)
        if png:
            try:
                import PIL.Image  # a dependency of smolagents, which shows images to the model

                return PIL.Image.open(io.BytesIO(png))
            except ImportError:
                return png
    return None


def _decode(value: str) -> Any:
    try:
        box = json.loads(value)
    except ValueError:
        return value  # not ours (the code raised NsboxFinalAnswer itself): its text is the answer
    if isinstance(box, dict) and "json" in box:
        return box["json"]
    if isinstance(box, dict) and "repr" in box:
        return box["repr"]
    return value

