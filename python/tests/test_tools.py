"""nsbox.tool_schema and nsbox.handle_tool_call, with real sandboxes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import jsonschema
import pytest

import nsbox
from adapters_env import PNG_MAGIC, need_sandboxes


def _params(fmt: str) -> dict:
    t = nsbox.tool_schema(fmt)
    return {
        "openai": lambda: t["function"]["parameters"],
        "openai-responses": lambda: t["parameters"],
        "anthropic": lambda: t["input_schema"],
        "json": lambda: t["parameters"],
    }[fmt]()


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic", "json"])
def test_schema_is_valid_json_schema(fmt: str) -> None:
    params = _params(fmt)
    jsonschema.Draft202012Validator.check_schema(params)
    jsonschema.Draft7Validator.check_schema(params)  # what the APIs document
    v = jsonschema.Draft202012Validator(params)
    assert v.is_valid({"code": "print(1)"})
    for bad in ({}, {"code": 1}, {"code": "x", "policy": "permissive"}, ["print(1)"]):
        assert not v.is_valid(bad), bad


def test_schema_shapes() -> None:
    o = nsbox.tool_schema("openai")
    assert o["type"] == "function" and o["function"]["name"] == "run_python"
    # OpenAI's strict mode: every property required, no others.
    p = o["function"]["parameters"]
    assert o["function"]["strict"] is True
    assert p["additionalProperties"] is False and set(p["required"]) == set(p["properties"])
    r = nsbox.tool_schema("openai-responses")
    assert r["type"] == "function" and r["name"] == "run_python" and "parameters" in r
    a = nsbox.tool_schema("anthropic", name="python")
    assert set(a) == {"name", "description", "input_schema"} and a["name"] == "python"
    # The description tells the model what persists and what the limits are.
    one, sess = a["description"], nsbox.tool_schema("anthropic", persistent=True)["description"]
    assert "fresh sandbox" in one and "do not persist" in one and "no network" in one
    assert "persist from one call to the next" in sess and "no network" in sess
    json.dumps(o), json.dumps(a)  # plain JSON, as the APIs take it
    with pytest.raises(ValueError, match="unknown format 'gemini'"):
        nsbox.tool_schema("gemini")


@pytest.mark.parametrize(
    "args, says",
    [
        ("print(1)", "not valid JSON"),
        ('["print(1)"]', "must be a JSON object, not an array"),
        ("{}", '"code" is missing'),
        ({"code": 42}, '"code" must be a string, not a number'),
        ({"code": None}, '"code" is missing'),
        ({"code": "print(1)", "policy": "permissive"}, "unknown argument(s) policy"),
        ({"code": "  \n"}, '"code" is empty'),
        (b"\xff", "not UTF-8"),
        (None, "must be a JSON object, not null"),
    ],
)
def test_bad_arguments_are_answered_not_raised(args, says: str) -> None:
    out = nsbox.handle_tool_call(args)
    assert isinstance(out, str)
    assert out.startswith("Error: ") and says in out, out
    assert '{"code": "print(1 + 1)"}' in out  # how to call it right
    blocks = nsbox.handle_tool_call(args, content="anthropic")
    assert blocks == [{"type": "text", "text": out}]


def test_print_one() -> None:
    need_sandboxes()
    out = nsbox.handle_tool_call('{"code": "print(1)"}')  # OpenAI's arguments: a JSON string
    assert out == "status: ok\n--- stdout ---\n1", out


def test_refused_import_is_readable() -> None:
    need_sandboxes()
    out = nsbox.handle_tool_call({"code": "import socket\nprint('reached')"})
    assert out.startswith("status: policy_violation (the sandbox's policy refused something"), out
    assert "import of 'socket' is not allowed by the policy" in out
    assert "line 1" in out and "reached" not in out


def test_exception_and_timeout() -> None:
    need_sandboxes()
    out = nsbox.handle_tool_call({"code": "print('before')\n1/0"})
    assert out.startswith("status: error\n--- stdout ---\nbefore\n"), out
    assert "ZeroDivisionError: division by zero" in out and "line 2" in out
    out = nsbox.handle_tool_call({"code": "while True:\n    pass"}, timeout=1)
    assert out.startswith("status: timeout (the code ran past its time limit and was stopped"), out


def test_output_is_cut_for_the_model() -> None:
    need_sandboxes()
    out = nsbox.handle_tool_call({"code": "print('a' * 100000)\nprint('the end')"}, max_chars=2000)
    assert len(out) < 2100 and "characters cut" in out
    assert out.startswith("status: ok") and out.endswith("the end")


def test_session_state_and_charts() -> None:
    need_sandboxes()
    schema = nsbox.tool_schema("anthropic", persistent=True)
    assert schema["name"] == "run_python"
    with nsbox.Sandbox(policy="datasci") as sb:
        first = nsbox.handle_tool_call({"code": "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})"}, sandbox=sb)
        assert first == "status: ok\n(no output)", first
        out = nsbox.handle_tool_call({"code": "print(df['a'].sum())\nint(df['a'].max())"}, sandbox=sb)
        assert out == "status: ok\n--- stdout ---\n6\n--- outputs ---\n3", out
        blocks = nsbox.handle_tool_call(
            {"code": "import matplotlib.pyplot as plt\nplt.plot(df['a'])\nprint('plotted')"},
            sandbox=sb,
            content="anthropic",
        )
        assert isinstance(blocks, list) and [b["type"] for b in blocks] == ["text", "image"]
        assert "plotted" in blocks[0]["text"] and "[chart 1: a PNG image of" in blocks[0]["text"]
        src = blocks[1]["source"]
        assert src["type"] == "base64" and src["media_type"] == "image/png"
        assert base64.b64decode(src["data"]).startswith(PNG_MAGIC)
        err = nsbox.handle_tool_call({"code": "undefined_name"}, sandbox=sb)
        assert err.startswith("status: error\n--- error ---\nNameError: name 'undefined_name' is not defined"), err
        assert err.count("Traceback") == 1  # shown once, not again as stderr
    out = nsbox.handle_tool_call({"code": "print(1)"}, sandbox=sb)
    assert out.startswith("status: session_ended\nThe session has ended"), out
    assert "the code was not run" in out


def test_import_nsbox_loads_no_framework() -> None:
    """The adapters' frameworks are optional: nsbox and nsbox.tools import none of them."""
    code = (
        "import sys, nsbox, nsbox.tools, nsbox.integrations\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'smolagents', 'pydantic', 'jsonschema'))\n"
        "assert not loaded, loaded\n"
        "assert nsbox.tool_schema is nsbox.tools.tool_schema and nsbox.handle_tool_call is nsbox.tools.handle_tool_call\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
