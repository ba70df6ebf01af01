"""What the adapters' tests need: their venv, and real sandboxes.

`make python-adapters-test` runs test_tools, test_langchain and
test_smolagents in python/.venv-adapters, which has the frameworks at the
versions of requirements-adapters.lock, and sets NSBOX_ADAPTERS_TEST=1.
Anywhere else (the SDK's own unittest discovery, which has no frameworks)
the three modules skip as a whole: they are that target's.

Each test runs real sandboxes through the SDK: a service (NSBOX_SERVER,
the default socket) or, as root, the SDK's private `nsbox serve` and the
nsbox binary (NSBOX_BIN). Without either the tests skip, and with
NSBOX_MUST_WORK=1 (CI) they fail instead: a host that cannot run them must
not pass for one that did.
"""

from __future__ import annotations

import os
import unittest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def adapters_venv_only() -> None:
    """Skip the calling module outside make python-adapters-test."""
    if os.environ.get("NSBOX_ADAPTERS_TEST") != "1":
        raise unittest.SkipTest("the adapters' tests run in their venv: make python-adapters-test")


def need_sandboxes() -> None:
    """Skip (or fail, under NSBOX_MUST_WORK=1) where no sandbox can run."""
    if os.environ.get("NSBOX_SERVER") or os.path.exists("/run/nsbox/nsbox.sock") or os.geteuid() == 0:
        return
    why = "no nsbox service is configured and the tests are not root (nothing can start one)"
    if os.environ.get("NSBOX_MUST_WORK") == "1":
        raise AssertionError(why + "; NSBOX_MUST_WORK=1 forbids skipping")
    raise unittest.SkipTest(why)
