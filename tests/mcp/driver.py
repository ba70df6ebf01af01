"""Drive `nsbox mcp` over stdio with the official MCP Python client.

Run by tests/mcp_test.go (TestMCPStdio) with the venv of requirements.txt:

    driver.py check NSBOX ERRLOG -- ARGS...   every tool, as a model would call them
    driver.py bench NSBOX ERRLOG N -- ARGS...  N run_python calls of print(1), timed

ARGS are given to `nsbox mcp`. The check leaves two sessions open when it
returns: the client then closes the server's stdin, and the Go test checks
that nothing of them is left. It prints one JSON object on stdout.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

TOOLS = {"run_python", "create_session", "run_cell", "upload_file", "download_file", "list_files", "close_session"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CSV = "city,temp\nOslo,3\nLima,19\nCairo,25\n"


class Failure(Exception):
    pass


def expect(cond: bool, what: str, got: Any = None) -> None:
    if not cond:
        raise Failure(f"{what}: got {got!r}")


def texts(r: types.CallToolResult) -> str:
    return "\n".join(c.text for c in r.content if isinstance(c, types.TextContent))


async def call(s: ClientSession, name: str, args: dict[str, Any]) -> types.CallToolResult:
    r = await s.call_tool(name, args)
    expect(not r.is_error, f"{name} {args}", texts(r))
    return r


async def check(s: ClientSession) -> dict[str, Any]:
    tools = (await s.list_tools()).tools
    names = {t.name for t in tools}
    expect(names == TOOLS, "the tools", sorted(names))
    for t in tools:
        expect(len(t.description or "") > 80 and "network" in (t.description or "") or t.name not in ("run_python", "create_session"), f"{t.name}'s description", t.description)
        expect(t.input_schema.get("type") == "object", f"{t.name}'s input schema", t.input_schema)
    run_py = next(t for t in tools if t.name == "run_python")
    expect("datasci" in (run_py.description or ""), "run_python names the policies offered", run_py.description)

    # One-shot: the result object as structured content, the output as text.
    r = await call(s, "run_python", {"code": "print(1)"})
    sc = r.structured_content or {}
    expect(sc.get("status") == "ok" and sc.get("stdout") == "1\n" and sc.get("schema") == 1, "run_python's result", sc)
    expect("stdout:\n1\n" in texts(r), "run_python's text", texts(r))

    # A failing program is a result (status error, exit code), not a tool error.
    r = await call(s, "run_python", {"code": "import sys; sys.exit(3)"})
    expect((r.structured_content or {}).get("exit_code") == 3, "exit code 3", r.structured_content)

    # A policy not served is a tool error the model can read.
    r = await s.call_tool("run_python", {"code": "print(1)", "policy": "permissive"})
    expect(r.is_error and "policy_refused" in texts(r) and "datasci" in texts(r), "a refused policy", texts(r))

    # A session on datasci: a CSV in, pandas reads it, state persists, a chart comes back as an image.
    r = await call(s, "create_session", {"policy": "datasci", "idle_timeout": 120})
    sid = (r.structured_content or {}).get("session_id")
    expect(isinstance(sid, str) and sid != "", "a session id", r.structured_content)
    await call(s, "upload_file", {"session_id": sid, "path": "data/temps.csv", "content": CSV})
    r = await call(s, "run_cell", {"session_id": sid, "code": "import pandas as pd\ndf = pd.read_csv('/workspace/data/temps.csv')\nprint(df['temp'].sum())"})
    expect((r.structured_content or {}).get("stdout") == "47\n", "pandas read the CSV", r.structured_content)
    r = await call(s, "run_cell", {"session_id": sid, "code": "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar(df['city'], df['temp'])\nfig.savefig('/workspace/chart.png')\nlen(df)"})
    images = [c for c in r.content if isinstance(c, types.ImageContent)]
    expect(len(images) == 1 and images[0].mime_type == "image/png", "one PNG image", [type(c).__name__ for c in r.content])
    png = base64.b64decode(images[0].data)
    expect(png.startswith(PNG_MAGIC), "the image's PNG header", png[:8])
    expect("output:\n3" in texts(r), "the last expression's value", texts(r))
    r = await call(s, "list_files", {"session_id": sid})
    paths = {f["path"] for f in (r.structured_content or {}).get("files", [])}
    expect({"data", "chart.png"} <= paths, "list_files", paths)
    r = await call(s, "download_file", {"session_id": sid, "path": "chart.png"})
    expect(any(isinstance(c, types.ImageContent) for c in r.content), "download_file of a PNG is an image", r.content)
    r = await call(s, "download_file", {"session_id": sid, "path": "data/temps.csv"})
    expect((r.structured_content or {}).get("content") == CSV, "download_file of text", r.structured_content)

    # An exception in a cell is data, and the session lives on.
    r = await call(s, "run_cell", {"session_id": sid, "code": "1/0"})
    expect((r.structured_content or {}).get("exception", {}).get("name") == "ZeroDivisionError", "the cell's exception", r.structured_content)
    expect("ZeroDivisionError" in texts(r), "the exception as text", texts(r))

    # Escapes from the workspace are refused.
    r = await s.call_tool("download_file", {"session_id": sid, "path": "../../etc/passwd"})
    expect(r.is_error and "root:" not in texts(r), "a path out of /workspace", texts(r))

    # close_session ends it; its id is gone.
    r = await call(s, "close_session", {"session_id": sid})
    expect((r.structured_content or {}).get("status") is not None, "the session's own result", r.structured_content)
    r = await s.call_tool("run_cell", {"session_id": sid, "code": "1"})
    expect(r.is_error and "no_session" in texts(r), "a closed session", texts(r))

    # Two sessions left open, one of them running a cell's thread: closing stdin must end them.
    left = []
    for policy in ("default", "datasci"):
        r = await call(s, "create_session", {"policy": policy})
        left.append((r.structured_content or {})["session_id"])
    await call(s, "run_cell", {"session_id": left[0], "code": "import threading, time\nthreading.Thread(target=lambda: time.sleep(600), daemon=True).start()\nx = 1"})
    return {"ok": True, "left_open": left}


async def bench(s: ClientSession, n: int) -> dict[str, Any]:
    await call(s, "run_python", {"code": "print(1)"})  # the first call starts what the pool holds
    ms: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await call(s, "run_python", {"code": "print(1)"})
        ms.append((time.perf_counter() - t0) * 1000)
        expect((r.structured_content or {}).get("stdout") == "1\n", "print(1)", r.structured_content)
        await asyncio.sleep(0.05)  # as a model between calls: the pool refills
    return {"ok": True, "n": n, "mcp_run_python": summary(ms), "bare_python": summary(timed(["/usr/bin/python3", "-c", "print(1)"], n))}


def timed(argv: list[str], n: int) -> list[float]:
    """Milliseconds of n runs of argv as a subprocess, as a caller times them."""
    ms: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


def summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 2), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2), "min_ms": round(ms[0], 2)}


async def main(argv: list[str]) -> int:
    sep = argv.index("--")
    mode, nsbox, errlog = argv[1], argv[2], argv[3]
    rest, args = argv[4:sep], argv[sep + 1:]
    # The client passes the server a safe subset of its environment; the
    # test's NSBOX_* settings (state dir, roots, host id range) go too.
    env = {k: v for k, v in os.environ.items() if k.startswith("NSBOX_")}
    params = StdioServerParameters(command=nsbox, args=["mcp", *args], env=env)
    with open(errlog, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                try:
                    out = await check(s) if mode == "check" else await bench(s, int(rest[0]))
                except Failure as e:
                    out = {"ok": False, "error": str(e)}
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv)))
