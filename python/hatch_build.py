"""Build hook of the nsbox wheel: the binaries and the platform tag.

The wheel carries nsbox, nsbox-init and nsbox-serve (built by `make build`
into ../bin, or the directory NSBOX_WHEEL_BIN names) as scripts, which an
installer puts on the PATH side by side (the venv's bin/), as ruff and uv
ship theirs. The binaries are static, so the wheel is tagged for any x86_64
Linux (manylinux and musllinux) rather than for one Python: the Python code
is the same for every Python 3.9+.

The version is the packed nsbox binary's own (`nsbox --version`: `git
describe` when it was built), so the wheel and its binaries always agree,
made PEP 440:
"v1.2.3" is 1.2.3; a bare commit "7a1c054" is 0.0.0+g7a1c054;
"v1.2.3-4-gabc" is 1.2.3.post4+gabc; "-dirty" adds ".dirty" to the local
part.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BINARIES = ("nsbox", "nsbox-init", "nsbox-serve")
TAG = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64"


def bin_dir() -> Path:
    return Path(os.environ.get("NSBOX_WHEEL_BIN", Path(__file__).resolve().parent.parent / "bin")).resolve()


def wheel_version() -> str:
    """The PEP 440 form of the nsbox binary's version (see the module's doc)."""
    nsbox = bin_dir() / "nsbox"
    try:
        out = subprocess.run([str(nsbox), "--version"], capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"wheel: {nsbox} --version: {e}; run `make build` first") from e
    prefix = "nsbox version "
    if not out.startswith(prefix):
        raise RuntimeError(f"wheel: {nsbox} --version: unexpected output {out!r}")
    return pep440(out[len(prefix) :].strip())


def pep440(raw: str) -> str:
    """The PEP 440 form of a `git describe --always --dirty` version."""
    dirty = raw.endswith("-dirty")
    if dirty:
        raw = raw[: -len("-dirty")]
    local = []
    # A tag needs its "v": a bare commit can be all digits ("5570961").
    m = re.fullmatch(r"v(\d+(?:\.\d+)*)(?:-(\d+)-g([0-9a-f]+))?", raw)
    if m:
        version = m.group(1)
        if m.group(2):
            version += ".post" + m.group(2)
            local.append("g" + m.group(3))
    elif re.fullmatch(r"[0-9a-f]{4,40}", raw):
        version = "0.0.0"
        local.append("g" + raw)
    else:
        raise RuntimeError(f"nsbox version {raw!r}: want vX.Y.Z, vX.Y.Z-N-gHASH or a commit hash")
    if dirty:
        local.append("dirty")
    return version + ("+" + ".".join(local) if local else "")


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        bindir = bin_dir()
        for name in BINARIES:
            path = bindir / name
            try:
                st = path.stat()
            except OSError as e:
                raise RuntimeError(f"wheel: binary {path}: {e.strerror}; run `make build` first") from e
            if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
                raise RuntimeError(f"wheel: binary {path}: not an executable file")
            build_data["shared_scripts"][str(path)] = name
        build_data["pure_python"] = False
        build_data["tag"] = TAG
