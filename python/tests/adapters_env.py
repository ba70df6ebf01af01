"""What the adapters' tests need: real sandboxes.

Each test runs real sandboxes through the SDK: a service (NSBOX_SERVER, the
default socket) or, as root, the SDK's private `nsbox serve` and the nsbox
binary (NSBOX_BIN). Without either the tests skip, and with
NSBOX_MUST_WORK=1 (CI) they fail instead: a host that cannot run them must
not pass for one that did.
"""

from __future__ import annotations

import os

import pytest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def need_sandboxes() -> None:
    """Skip (or fail, under NSBOX_MUST_WORK=1) where no sandbox can run."""
    if os.environ.get("NSBOX_SERVER") or os.path.exists("/run/nsbox/nsbox.sock") or os.geteuid() == 0:
        return
    why = "no nsbox service is configured and the tests are not root (nothing can start one)"
    if os.environ.get("NSBOX_MUST_WORK") == "1":
        pytest.fail(why + "; NSBOX_MUST_WORK=1 forbids skipping")
    pytest.skip(why)
