"""nsbox.tool_schema and nsbox.handle_tool_call, with real sandboxes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import unittest
from typing import Any, Dict

from .adapters_env import PNG_MAGIC, adapters_venv_only, need_sandboxes

adapters_venv_only()

import jsonschema  # noqa: E402

import nsbox  # noqa: E402

FORMATS = ["openai", "openai-responses", "anthropic", "json"]


def _params(fmt: str) -> Dict[str, Any]:
    t = nsbox.tool_schema(fmt)
    if fmt == "openai":
        return t["function"]["parameters"]
    if fmt == "anthropic":
        return t["input_schema"]
    return t["parameters"]


class SchemaTest(unittest.TestCase):
    def test_schema_is_valid_json_schema(self) -> None:
        for fmt in FORMATS:
            with self.subTest(fmt=fmt):
                params = _params(fmt)
                jsonschema.Draft202012Validator.check_schema(params)
                jsonschema.Draft7Validator.check_schema(params)  # what the APIs document
                v = jsonschema.Draft202012Validator(params)
                self.assertTrue(v.is_valid({"code": "print(1)"}))
                for bad in ({}, {"code": 1}, {"code": "x", "policy": "permissive"}, ["print(1)"]):
                    self.assertFalse(v.is_valid(bad), bad)

    def test_schema_shapes(self) -> None:
        o = nsbox.tool_schema("openai")
        self.assertEqual((o["type"], o["function"]["name"]), ("function", "run_python"))
        # OpenAI's strict mode: every property required, no others.
        p = o["function"]["parameters"]
        self.assertIs(o["function"]["strict"], True)
        self.assertIs(p["additionalProperties"], False)
        self.assertEqual(set(p["required"]), set(p["properties"]))
        r = nsbox.tool_schema("openai-responses")
        self.assertEqual((r["type"], r["name"]), ("function", "run_python"))
        self.assertIn("parameters", r)
        a = nsbox.tool_schema("anthropic", name="python")
        self.assertEqual(set(a), {"name", "description", "input_schema"})
        self.assertEqual(a["name"], "python")
        # The description tells the model what persists and what the limits are.
        one, sess = a["description"], nsbox.tool_schema("anthropic", persistent=True)["description"]
        for want in ("fresh sandbox", "do not persist", "no network"):
            self.assertIn(want, one)
        for want in ("persist from one call to the next", "no network"):
            self.assertIn(want, sess)
        json.dumps(o), json.dumps(a)  # plain JSON, as the APIs take it
        with self.assertRaisesRegex(ValueError, "unknown format 'gemini'"):
            nsbox.tool_schema("gemini")

    def test_import_nsbox_loads_no_framework(self) -> None:
        """The adapters' frameworks are optional: nsbox and nsbox.tools import none of them."""
        code = (
            "import sys, nsbox, nsbox.tools, nsbox.integrations\n"
            "fw = ('langchain_core', 'smolagents', 'pydantic', 'jsonschema')\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in fw)\n"
            "assert not loaded, loaded\n"
            "assert nsbox.tool_schema is nsbox.tools.tool_schema\n"
            "assert nsbox.handle_tool_call is nsbox.tools.handle_tool_call\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True)


class BadArgumentsTest(unittest.TestCase):
    CASES = [
        ("print(1)", "not valid JSON"),
        ('["print(1)"]', "must be a JSON object, not an array"),
        ("{}", '"code" is missing'),
        ({"code": 42}, '"code" must be a string, not a number'),
        ({"code": None}, '"code" is missing'),
        ({"code": "print(1)", "policy": "permissive"}, "unknown argument(s) policy"),
        ({"code": "  \n"}, '"code" is empty'),
        (b"\xff", "not UTF-8"),
        (None, "must be a JSON object, not null"),
    ]

    def test_bad_arguments_are_answered_not_raised(self) -> None:
        for args, says in self.CASES:
            with self.subTest(args=args):
                out = nsbox.handle_tool_call(args)
                self.assertIsInstance(out, str)
                assert isinstance(out, str)
                self.assertTrue(out.startswith("Error: "), out)
                self.assertIn(says, out)
                self.assertIn('{"code": "print(1 + 1)"}', out)  # how to call it right
                blocks = nsbox.handle_tool_call(args, content="anthropic")
                self.assertEqual(blocks, [{"type": "text", "text": out}])


class OneShotTest(unittest.TestCase):
    def setUp(self) -> None:
        need_sandboxes()

    def test_print_one(self) -> None:
        out = nsbox.handle_tool_call('{"code": "print(1)"}')  # OpenAI's arguments: a JSON string
        self.assertEqual(out, "status: ok\n--- stdout ---\n1")

    def test_refused_import_is_readable(self) -> None:
        out = nsbox.handle_tool_call({"code": "import socket\nprint('reached')"})
        assert isinstance(out, str)
        self.assertTrue(out.startswith("status: policy_violation (the sandbox's policy refused something"), out)
        self.assertIn("import of 'socket' is not allowed by the policy", out)
        self.assertIn("line 1", out)
        self.assertNotIn("reached", out)

    def test_exception_and_timeout(self) -> None:
        out = nsbox.handle_tool_call({"code": "print('before')\n1/0"})
        assert isinstance(out, str)
        self.assertTrue(out.startswith("status: error\n--- stdout ---\nbefore\n"), out)
        self.assertIn("ZeroDivisionError: division by zero", out)
        self.assertIn("line 2", out)
        out = nsbox.handle_tool_call({"code": "while True:\n    pass"}, timeout=1)
        assert isinstance(out, str)
        self.assertTrue(out.startswith("status: timeout (the code ran past its time limit and was stopped"), out)

    def test_output_is_cut_for_the_model(self) -> None:
        out = nsbox.handle_tool_call({"code": "print('a' * 100000)\nprint('the end')"}, max_chars=2000)
        assert isinstance(out, str)
        self.assertLess(len(out), 2100)
        self.assertIn("characters cut", out)
        self.assertTrue(out.startswith("status: ok") and out.endswith("the end"), out)


class SessionTest(unittest.TestCase):
    def setUp(self) -> None:
        need_sandboxes()

    def test_session_state_and_charts(self) -> None:
        with nsbox.Sandbox(policy="datasci") as sb:
            first = nsbox.handle_tool_call({"code": "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})"}, sandbox=sb)
            self.assertEqual(first, "status: ok\n(no output)")
            out = nsbox.handle_tool_call({"code": "print(df['a'].sum())\nint(df['a'].max())"}, sandbox=sb)
            self.assertEqual(out, "status: ok\n--- stdout ---\n6\n--- outputs ---\n3")
            blocks = nsbox.handle_tool_call(
                {"code": "import matplotlib.pyplot as plt\nplt.plot(df['a'])\nprint('plotted')"},
                sandbox=sb,
                content="anthropic",
            )
            assert isinstance(blocks, list)
            self.assertEqual([b["type"] for b in blocks], ["text", "image"])
            self.assertIn("plotted", blocks[0]["text"])
            self.assertIn("[chart 1: a PNG image of", blocks[0]["text"])
            src = blocks[1]["source"]
            self.assertEqual((src["type"], src["media_type"]), ("base64", "image/png"))
            self.assertTrue(base64.b64decode(src["data"]).startswith(PNG_MAGIC))
            err = nsbox.handle_tool_call({"code": "undefined_name"}, sandbox=sb)
            assert isinstance(err, str)
            self.assertTrue(err.startswith("status: error\n--- error ---\nNameError: name 'undefined_name' is not defined"), err)
            self.assertEqual(err.count("Traceback"), 1)  # shown once, not again as stderr
        out = nsbox.handle_tool_call({"code": "print(1)"}, sandbox=sb)
        assert isinstance(out, str)
        self.assertTrue(out.startswith("status: session_ended\nThe session has ended"), out)
        self.assertIn("the code was not run", out)

    def test_a_cell_that_ends_the_session_says_so(self) -> None:
        with nsbox.Sandbox(policy="default") as sb:
            out = nsbox.handle_tool_call({"code": "import os\nos._exit(0)"}, sandbox=sb)
            self.assertIn("The session ended with this call: variables, imports and files from earlier calls are gone.", out)
            out = nsbox.handle_tool_call({"code": "print(1)"}, sandbox=sb)
            assert isinstance(out, str)
            self.assertTrue(out.startswith("status: session_ended"), out)


if __name__ == "__main__":
    unittest.main()
