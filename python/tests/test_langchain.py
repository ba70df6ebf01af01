"""NsboxPythonTool against the real langchain-core, with real sandboxes."""

from __future__ import annotations

import jsonschema
import pytest

pytest.importorskip("langchain_core", reason="the adapters' venv (make python-adapters-test) has langchain-core")

from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

import nsbox  # noqa: E402
from adapters_env import PNG_MAGIC, need_sandboxes  # noqa: E402
from nsbox.integrations.langchain import NsboxPythonTool  # noqa: E402


def _call(tool: NsboxPythonTool, code: str, n: int) -> ToolMessage:
    """Invoke the tool as an agent does, with a model's tool call."""
    msg = tool.invoke({"type": "tool_call", "name": tool.name, "args": {"code": code}, "id": f"call-{n}"})
    assert isinstance(msg, ToolMessage) and msg.tool_call_id == f"call-{n}"
    return msg


def test_schema_for_models() -> None:
    tool = NsboxPythonTool()
    spec = convert_to_openai_tool(tool)
    fn = spec["function"]
    assert fn["name"] == "python" and "persist from one call to the next" in fn["description"]
    assert fn["parameters"]["required"] == ["code"]
    jsonschema.Draft202012Validator.check_schema(fn["parameters"])
    one_shot = NsboxPythonTool(persistent=False)
    assert "Each call starts a fresh sandbox" in one_shot.description
    assert NsboxPythonTool(description="mine").description == "mine"


def test_state_persists_across_calls() -> None:
    need_sandboxes()
    with NsboxPythonTool(policy="datasci", timeout=20) as tool:
        first = _call(tool, "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\nprint(len(df))", 1)
        assert first.content == "status: ok\n--- stdout ---\n3", first.content
        second = _call(tool, "df['y'] = df['x'] * 14\nint(df['y'].sum())", 2)
        assert second.content == "status: ok\n--- outputs ---\n84", second.content
        assert second.artifact["result"].status == "ok" and second.artifact["images"] == []
        # A chart: the model is told; its bytes are the artifact, not the content.
        chart = _call(tool, "import matplotlib.pyplot as plt\nplt.plot(df['x'], df['y'])", 3)
        assert "[chart 1: a PNG image of" in chart.content
        assert len(chart.artifact["images"]) == 1 and chart.artifact["images"][0].startswith(PNG_MAGIC)
        table = _call(tool, "df.head(2)", 4)
        assert "x   y" in table.content and table.artifact["html"] and "<table" in table.artifact["html"][0]
        # The cell's own exception is the model's to read, not an exception here.
        err = _call(tool, "df['nope']", 5)
        assert err.content.startswith("status: error\n--- error ---\nKeyError: 'nope'"), err.content
        refused = _call(tool, "import subprocess", 6)
        assert refused.content.startswith("status: policy_violation")
        assert "import of 'subprocess' is not allowed by the policy" in refused.content
        still = tool.invoke({"code": "print(int(df['y'].max()))"})  # plain invoke: the content alone
        assert still == "status: ok\n--- stdout ---\n42", still
        sb = tool._own
        assert sb is not None and not sb.closed
    assert sb.closed and tool._own is None


def test_ended_session_is_said_and_replaced() -> None:
    need_sandboxes()
    with NsboxPythonTool(policy="default") as tool:
        assert _call(tool, "x = 1", 1).content == "status: ok\n(no output)"
        # The interpreter exits: the session ends with the cell, and the model is told.
        gone = _call(tool, "import os\nos._exit(3)", 2).content
        assert gone.startswith("status: error"), gone
        assert "The session ended with this call: variables, imports and files from earlier calls are gone." in gone
        out = _call(tool, "print('again')\nprint(x)", 3).content
        assert out.startswith("status: error\n--- stdout ---\nagain\n"), out
        assert "NameError: name 'x' is not defined" in out
        # A session closed under the tool (its idle timeout, say) is replaced, and that is said.
        tool._own.close()
        out = _call(tool, "print('third')", 4).content
        assert out.startswith("(The previous session had ended; this code ran in a new one"), out
        assert out.endswith("status: ok\n--- stdout ---\nthird"), out


def test_one_shot_mode_keeps_nothing() -> None:
    need_sandboxes()
    tool = NsboxPythonTool(persistent=False, policy="default", timeout=10)
    assert _call(tool, "x = 5\nprint(x * 2)", 1).content == "status: ok\n--- stdout ---\n10"
    second = _call(tool, "print(x)", 2)
    assert second.content.startswith("status: error") and "NameError: name 'x' is not defined" in second.content
    assert tool._own is None  # no session was opened


def test_given_sandbox_is_used_and_left_open() -> None:
    need_sandboxes()
    with nsbox.Sandbox(policy="default") as sb:
        sb.run_code("shared = 'from the caller'")
        tool = NsboxPythonTool(sandbox=sb)
        assert _call(tool, "print(shared)", 1).content == "status: ok\n--- stdout ---\nfrom the caller"
        tool.close()
        assert not sb.closed
    out = _call(tool, "print(shared)", 2).content
    assert out.startswith("status: session_ended"), out


async def _acall(tool: NsboxPythonTool, code: str) -> str:
    return await tool.ainvoke({"code": code})


def test_async_invoke() -> None:
    need_sandboxes()
    import asyncio

    with NsboxPythonTool(policy="default") as tool:
        assert asyncio.run(_acall(tool, "n = 7")) == "status: ok\n(no output)"
        assert asyncio.run(_acall(tool, "print(n * 6)")) == "status: ok\n--- stdout ---\n42"
