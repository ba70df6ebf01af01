"""nsbox as a function-calling tool for a model.

`tool_schema()` is the tool's definition (a name, a description written for
the model, a JSON schema of its one argument, `code`) in the shape the OpenAI
or Anthropic API wants; `handle_tool_call(args)` runs the call the model made
and answers with text the model can read: the status, stdout, stderr, the
error, and which charts the code produced.

    import nsbox
    tools = [nsbox.tool_schema("anthropic")]
    ...                                    # the model answers with a tool_use block
    text = nsbox.handle_tool_call(block.input)

By default each call is one-shot (`nsbox.run`: a fresh sandbox, nothing
persists). Give `handle_tool_call` a `Sandbox` and the calls are cells of that
session (variables, imports and /workspace persist); describe it so with
`tool_schema(persistent=True)`.

The model's arguments are untrusted input like its code: bad arguments are
answered with a message for the model, never raised. What the host must know
about (no service, a policy the service does not serve) is raised as the
SDK's NsboxError.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:  # the SDK's types, for the annotations only
    from .sandbox import Sandbox

__all__ = ["tool_schema", "handle_tool_call", "describe", "session_over", "TOOL_NAME"]

TOOL_NAME = "run_python"

# The formats tool_schema knows: the wrapper each API puts around the same
# name, description and JSON schema.
FORMATS = ("openai", "openai-responses", "anthropic", "json")

# What a model reads back is cut to this many characters (the head and the
# tail kept): a program that prints a megabyte must not fill the context.
DEFAULT_MAX_CHARS = 20000

_ONE_SHOT = (
    "Run Python 3 code in an isolated sandbox and get back what it printed. "
    "Each call starts a fresh sandbox: variables, imports and files do not persist "
    "from one call to the next, so put everything a computation needs in one call. "
    "Print what you want to see; the value of a final bare expression is shown too."
)
_PERSISTENT = (
    "Run Python 3 code in a persistent sandboxed session, like a notebook cell, "
    "and get back what it printed. Variables, functions, imports and files in "
    "/workspace persist from one call to the next, so build on earlier calls "
    "instead of repeating them. Print what you want to see; the value of a final "
    "bare expression is shown too, and matplotlib figures left open are returned as charts."
)
_LIMITS = (
    " The sandbox has no network access, so nothing can be downloaded or installed; "
    "only the modules its policy allows can be imported (the standard library, and "
    "with the data-science policy numpy, pandas, matplotlib, seaborn, scipy, statsmodels, "
    "scikit-learn, openpyxl and pyarrow), and a refused "
    "import or call is reported as an error. Each call has a time limit and a memory "
    "limit. The result starts with a status line: ok, error, timeout, memory_limit, "
    "output_limit or policy_violation."
)

_CODE_DESCRIPTION = "The Python source to run, as a complete program or cell (not a file name)."


def _parameters() -> Dict[str, Any]:
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "description": _CODE_DESCRIPTION}},
        "required": ["code"],
        "additionalProperties": False,
    }


def tool_schema(format: str = "openai", *, persistent: bool = False, name: str = TOOL_NAME) -> Dict[str, Any]:
    """The tool's definition for a model's API.

    format: "openai" (Chat Completions: {"type": "function", "function": {...}}),
    "openai-responses" (the Responses API: {"type": "function", "name", ...}),
    "anthropic" (Messages API: {"name", "description", "input_schema"}) or
    "json" ({"name", "description", "parameters"}, for other frameworks).
    persistent: describe calls that share one session (pass the Sandbox to
    handle_tool_call) rather than a fresh sandbox per call.
    """
    description = (_PERSISTENT if persistent else _ONE_SHOT) + _LIMITS
    params = _parameters()
    if format == "openai":
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": params, "strict": True},
        }
    if format == "openai-responses":
        return {"type": "function", "name": name, "description": description, "parameters": params, "strict": True}
    if format == "anthropic":
        return {"name": name, "description": description, "input_schema": params}
    if format == "json":
        return {"name": name, "description": description, "parameters": params}
    raise ValueError(f"tool_schema: unknown format {format!r}: use one of {', '.join(FORMATS)}")


Content = Union[str, List[Dict[str, Any]]]


def handle_tool_call(
    args: Union[str, bytes, Mapping[str, Any], None],
    *,
    sandbox: Optional["Sandbox"] = None,
    policy: str = "default",
    timeout: Optional[float] = None,
    content: str = "text",
    max_chars: int = DEFAULT_MAX_CHARS,
) -> Content:
    """Run a call of the tool and answer what the model should read.

    args: the call's arguments, a dict (Anthropic's `input`) or a JSON string
    (OpenAI's `arguments`). Arguments that are not {"code": "<source>"} are
    answered with a message saying so, not raised.
    sandbox: run the code as a cell of this session (state persists); without
    it every call is a one-shot nsbox.run under `policy`, `timeout`.
    content: "text" answers a string; "anthropic" a list of Anthropic content
    blocks, the text and one image block per chart (a tool_result's content).
    """
    if content not in ("text", "anthropic"):
        raise ValueError(f"handle_tool_call: unknown content {content!r}: use 'text' or 'anthropic'")
    code, problem = _parse_args(args)
    if problem is not None:
        return problem if content == "text" else [{"type": "text", "text": problem}]
    assert code is not None
    ended = False
    if sandbox is not None:
        cell = _run_cell(sandbox, code)
        if isinstance(cell, str):
            return cell if content == "text" else [{"type": "text", "text": cell}]
        outcome, ended = cell
    else:
        from . import run  # the SDK; imported here so that nsbox/__init__ may import this module first

        outcome = run(code, policy=policy, timeout=timeout)
    text = describe(outcome, max_chars=max_chars, session_ended=ended)
    if content == "text":
        return text
    blocks: List[Dict[str, Any]] = [{"type": "text", "text": text}]
    for png in _pngs(outcome):
        blocks.append(
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode("ascii")},
            }
        )
    return blocks


def _run_cell(sandbox: "Sandbox", code: str) -> Union[str, Tuple[Any, bool]]:
    """(a cell's Execution, whether the session ended with it), or the text
    that tells the model why the code was not run."""
    from .errors import LimitExceeded, SessionNotFound

    try:
        if getattr(sandbox, "closed", False):
            raise SessionNotFound("it was closed")
        ex = sandbox.run_code(code)
    except SessionNotFound as e:
        return (
            "status: session_ended\n"
            f"The session has ended ({e.message}): its variables, imports and files are gone, "
            "and the code was not run. Ask the user to start a new session."
        )
    except LimitExceeded as e:
        if e.code not in ("cell_too_large", "body_too_large"):
            raise  # too many sessions or runs at once: the host's to handle
        return f"Error: the code was not run: it is larger than the sandbox accepts ({e.message}). Send shorter code."
    return ex, session_over(sandbox, ex)


def session_over(sandbox: Any, ex: Any) -> bool:
    """Whether the session ended with the cell ex: a memory kill, the
    interpreter's own exit, a cell that would not stop. Asked of the service
    only after a cell that did not end ok, or that has a reason (a cell
    whose interpreter exited 0 is ok, with the reason why it is over)."""
    from .errors import SessionNotFound

    if str(getattr(ex, "status", "")) == "ok" and not getattr(ex, "reason", None):
        return False
    try:
        return bool(sandbox.info().ended)
    except SessionNotFound:
        return True


def _parse_args(args: Union[str, bytes, Mapping[str, Any], None]) -> Tuple[Optional[str], Optional[str]]:
    """(code, None), or (None, a message for the model)."""
    usage = f'Call {TOOL_NAME} with one argument, "code": the Python source to run, e.g. {{"code": "print(1 + 1)"}}.'
    if isinstance(args, (bytes, bytearray)):
        try:
            args = args.decode("utf-8")
        except UnicodeDecodeError:
            return None, "Error: the arguments are not UTF-8 text. " + usage
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as e:
            return None, f"Error: the arguments are not valid JSON ({e}). " + usage
    if not isinstance(args, Mapping):
        return None, f"Error: the arguments must be a JSON object, not {_json_type(args)}. " + usage
    unknown = sorted(str(k) for k in args if k != "code")
    if unknown:
        return None, f"Error: unknown argument(s) {', '.join(unknown)}. " + usage
    code = args.get("code")
    if code is None:
        return None, 'Error: the argument "code" is missing. ' + usage
    if not isinstance(code, str):
        return None, f'Error: "code" must be a string, not {_json_type(code)}. ' + usage
    if not code.strip():
        return None, 'Error: "code" is empty: there is nothing to run. ' + usage
    return code, None


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, Sequence):
        return "an array"
    return type(v).__name__


# What each status means, for a model that has to decide what to do next.
_STATUS_TEXT = {
    "timeout": "the code ran past its time limit and was stopped",
    "memory_limit": "the code used more memory than the sandbox allows and was killed",
    "output_limit": "the code printed more than the sandbox keeps and was stopped",
    "policy_violation": "the sandbox's policy refused something the code did",
    "killed": "the run was stopped from outside",
    "sandbox_error": "the sandbox could not run the code",
}


def describe(outcome: Any, *, max_chars: int = DEFAULT_MAX_CHARS, session_ended: bool = False) -> str:
    """What a model should read of a Result (nsbox.run) or an Execution (a cell).

    A status line first, then stdout, stderr, the error and the display
    outputs, each under its own heading and only when there is something.
    Charts are named, not inlined (their bytes are for content blocks or
    artifacts). Cut to max_chars, keeping the head and the tail.
    session_ended: say that the cell ended its session (session_over).
    """
    status = str(getattr(outcome, "status", "") or "unknown")
    parts: List[str] = []
    head = f"status: {status}"
    why = _STATUS_TEXT.get(status)
    reason = getattr(outcome, "reason", None)
    if why:
        head += f" ({why}" + (f": {reason}" if reason else "") + ")"
    elif reason and status != "ok":
        head += f" ({reason})"
    parts.append(head)
    if session_ended:
        parts.append("The session ended with this call: variables, imports and files from earlier calls are gone.")

    stdout = getattr(outcome, "stdout", "") or ""
    stderr = getattr(outcome, "stderr", "") or ""
    error, step = _errors(outcome)
    traceback = str(getattr(error, "traceback", "") or "") if error is not None else ""
    if stdout:
        parts.append("--- stdout ---\n" + stdout.rstrip("\n"))
        if getattr(outcome, "stdout_truncated", False):
            parts.append("(stdout was cut: the code printed more than the sandbox keeps)")
    # A cell's traceback is also on its stderr: show it once, under error.
    if traceback and traceback in stderr:
        stderr = stderr.replace(traceback, "")
    if stderr.strip():
        parts.append("--- stderr ---\n" + stderr.rstrip("\n"))
        if getattr(outcome, "stderr_truncated", False):
            parts.append("(stderr was cut: the code printed more than the sandbox keeps)")
    if error is not None:
        name = getattr(error, "name", "") or "Error"
        value = getattr(error, "value", "") or ""
        parts.append("--- error ---\n" + (f"{name}: {value}" if value else name))
        if traceback:
            parts.append(traceback.rstrip("\n"))
    if step is not None:
        parts.append(f"--- sandbox error ---\n{getattr(step, 'step', '')}: {getattr(step, 'message', step)}")
    # The refusals, unless the stderr shown above already names each (the
    # runner prints what its static check refused).
    violations = [v for v in getattr(outcome, "violations", None) or [] if _detail(v) not in stderr]
    if violations:
        lines = [f"- {_violation_text(v)}" for v in violations[:10]]
        if len(violations) > 10:
            lines.append(f"- ... and {len(violations) - 10} more")
        parts.append("--- refused by the sandbox's policy ---\n" + "\n".join(lines))
    shown = _outputs_text(outcome)
    if shown:
        parts.append("--- outputs ---\n" + "\n".join(shown))
    if len(parts) == 1 and status == "ok":
        parts.append("(no output)")
    return _cut("\n".join(parts), max_chars)


def _is_cell(outcome: Any) -> bool:
    return hasattr(outcome, "sandbox_error")


def _errors(outcome: Any) -> Tuple[Any, Any]:
    """(the program's uncaught exception, the sandbox step that failed).

    An Execution (a cell) names them error and sandbox_error; a Result
    (a run) exception and error.
    """
    if _is_cell(outcome):
        return getattr(outcome, "error", None), getattr(outcome, "sandbox_error", None)
    return getattr(outcome, "exception", None), getattr(outcome, "error", None)


def _detail(v: Any) -> str:
    return str(getattr(v, "detail", None) or getattr(v, "name", None) or v)


def _violation_text(v: Any) -> str:
    detail, line = _detail(v), getattr(v, "line", None)
    if len(detail) > 300:  # an import refusal lists every allowed module
        detail = detail[:300] + " ...)"
    return f"line {line}: {detail}" if line else detail


def _outputs_text(outcome: Any) -> List[str]:
    lines: List[str] = []
    charts = html = 0
    for out in getattr(outcome, "outputs", None) or []:
        png = getattr(out, "png", None)
        if png:
            charts += 1
            lines.append(f"[chart {charts}: a PNG image of {len(png)} bytes was produced]")
            continue
        text = getattr(out, "text", None)
        if text:
            lines.append(text.rstrip("\n"))
        elif getattr(out, "html", None):
            html += 1
    if html and len(lines) == charts:  # a value's HTML comes with its text form, shown above
        lines.append("[an HTML table was produced; it has no text form]")
    return lines


def _pngs(outcome: Any) -> List[bytes]:
    return [o.png for o in (getattr(outcome, "outputs", None) or []) if getattr(o, "png", None)]


def _cut(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    keep = max_chars // 2
    dropped = len(text) - 2 * keep
    return f"{text[:keep]}\n[... {dropped} characters cut ...]\n{text[-keep:]}"
