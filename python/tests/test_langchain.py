"""NsboxPythonTool against the real langchain-core, with real sandboxes."""

from __future__ import annotations

import asyncio
import unittest

from .adapters_env import PNG_MAGIC, adapters_venv_only, need_sandboxes

adapters_venv_only()

import jsonschema  # noqa: E402
from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

import nsbox  # noqa: E402
from nsbox.integrations.langchain import NsboxPythonTool  # noqa: E402


def _call(tool: NsboxPythonTool, code: str, n: int) -> ToolMessage:
    """Invoke the tool as an agent does, with a model's tool call."""
    msg = tool.invoke({"type": "tool_call", "name": tool.name, "args": {"code": code}, "id": f"call-{n}"})
    assert isinstance(msg, ToolMessage) and msg.tool_call_id == f"call-{n}", msg
    return msg


class SchemaTest(unittest.TestCase):
    def test_schema_for_models(self) -> None:
        tool = NsboxPythonTool()
        fn = convert_to_openai_tool(tool)["function"]
        self.assertEqual(fn["name"], "python")
        self.assertIn("persist from one call to the next", fn["description"])
        self.assertEqual(fn["parameters"]["required"], ["code"])
        jsonschema.Draft202012Validator.check_schema(fn["parameters"])
        self.assertIn("Each call starts a fresh sandbox", NsboxPythonTool(persistent=False).description)
        self.assertEqual(NsboxPythonTool(description="mine").description, "mine")


class ToolTest(unittest.TestCase):
    def setUp(self) -> None:
        need_sandboxes()

    def test_state_persists_across_calls(self) -> None:
        with NsboxPythonTool(policy="datasci", timeout=20) as tool:
            first = _call(tool, "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\nprint(len(df))", 1)
            self.assertEqual(first.content, "status: ok\n--- stdout ---\n3")
            second = _call(tool, "df['y'] = df['x'] * 14\nint(df['y'].sum())", 2)
            self.assertEqual(second.content, "status: ok\n--- outputs ---\n84")
            self.assertEqual(second.artifact["result"].status, "ok")
            self.assertEqual(second.artifact["images"], [])
            # A chart: the model is told; its bytes are the artifact, not the content.
            chart = _call(tool, "import matplotlib.pyplot as plt\nplt.plot(df['x'], df['y'])", 3)
            self.assertIn("[chart 1: a PNG image of", chart.content)
            self.assertEqual(len(chart.artifact["images"]), 1)
            self.assertTrue(chart.artifact["images"][0].startswith(PNG_MAGIC))
            table = _call(tool, "df.head(2)", 4)
            self.assertIn("x   y", table.content)
            self.assertIn("<table", table.artifact["html"][0])
            # The cell's own exception is the model's to read, not an exception here.
            err = _call(tool, "df['nope']", 5)
            self.assertTrue(str(err.content).startswith("status: error\n--- error ---\nKeyError: 'nope'"), err.content)
            refused = _call(tool, "import subprocess", 6)
            self.assertTrue(str(refused.content).startswith("status: policy_violation"), refused.content)
            self.assertIn("import of 'subprocess' is not allowed by the policy", refused.content)
            still = tool.invoke({"code": "print(int(df['y'].max()))"})  # plain invoke: the content alone
            self.assertEqual(still, "status: ok\n--- stdout ---\n42")
            sb = tool._own
            self.assertIsNotNone(sb)
            self.assertFalse(sb.closed)
        self.assertTrue(sb.closed)
        self.assertIsNone(tool._own)

    def test_ended_session_is_said_and_replaced(self) -> None:
        with NsboxPythonTool(policy="default") as tool:
            self.assertEqual(_call(tool, "x = 1", 1).content, "status: ok\n(no output)")
            # The interpreter exits: the session ends with the cell, and the model is told.
            gone = str(_call(tool, "import os\nos._exit(3)", 2).content)
            self.assertTrue(gone.startswith("status: error"), gone)
            self.assertIn("The session ended with this call: variables, imports and files from earlier calls are gone.", gone)
            out = str(_call(tool, "print('again')\nprint(x)", 3).content)
            self.assertTrue(out.startswith("status: error\n--- stdout ---\nagain\n"), out)
            self.assertIn("NameError: name 'x' is not defined", out)
            # A session closed under the tool (its idle timeout, say) is replaced, and that is said.
            tool._own.close()
            out = str(_call(tool, "print('third')", 4).content)
            self.assertTrue(out.startswith("(The previous session had ended; this code ran in a new one"), out)
            self.assertTrue(out.endswith("status: ok\n--- stdout ---\nthird"), out)

    def test_one_shot_mode_keeps_nothing(self) -> None:
        tool = NsboxPythonTool(persistent=False, policy="default", timeout=10)
        self.assertEqual(_call(tool, "x = 5\nprint(x * 2)", 1).content, "status: ok\n--- stdout ---\n10")
        second = str(_call(tool, "print(x)", 2).content)
        self.assertTrue(second.startswith("status: error"), second)
        self.assertIn("NameError: name 'x' is not defined", second)
        self.assertIsNone(tool._own)  # no session was opened

    def test_given_sandbox_is_used_and_left_open(self) -> None:
        with nsbox.Sandbox(policy="default") as sb:
            sb.run_code("shared = 'from the caller'")
            tool = NsboxPythonTool(sandbox=sb)
            self.assertEqual(_call(tool, "print(shared)", 1).content, "status: ok\n--- stdout ---\nfrom the caller")
            tool.close()
            self.assertFalse(sb.closed)
        out = str(_call(tool, "print(shared)", 2).content)
        self.assertTrue(out.startswith("status: session_ended"), out)

    def test_async_invoke(self) -> None:
        async def calls(tool: NsboxPythonTool) -> list:
            return [await tool.ainvoke({"code": "n = 7"}), await tool.ainvoke({"code": "print(n * 6)"})]

        with NsboxPythonTool(policy="default") as tool:
            self.assertEqual(asyncio.run(calls(tool)), ["status: ok\n(no output)", "status: ok\n--- stdout ---\n42"])


if __name__ == "__main__":
    unittest.main()
