"""Where the service is, and where the nsbox binary is.

The service: an address given to the call, else NSBOX_SERVER, in the forms
`nsbox run --server` accepts (unix:/ABSOLUTE/PATH or tcp:HOST:PORT; TCP
needs a token: NSBOX_TOKEN, or the first line of NSBOX_TOKEN_FILE, a file
no one but its owner may read or write, as nsbox checks it), else the
default socket /run/nsbox/nsbox.sock when it exists.

The binary: the one the wheel installed (the scripts directory of this
Python's install scheme, where pip puts the wheel's nsbox), else
NSBOX_BIN, else nsbox on the PATH.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import sysconfig
from pathlib import Path
from typing import List, Optional

from ._http import Endpoint
from .errors import NsboxError, ServiceUnavailable

DEFAULT_SOCKET = "/run/nsbox/nsbox.sock"


def parse_server(server: str, token: Optional[str] = None) -> Endpoint:
    """The endpoint of unix:PATH or tcp:HOST:PORT; a TCP one gets token,
    else NSBOX_TOKEN, else NSBOX_TOKEN_FILE's first line."""
    network, sep, addr = server.partition(":")
    if not sep or not addr:
        raise ServiceUnavailable(f"service address {server!r}: want unix:PATH or tcp:HOST:PORT")
    if network == "unix":
        if not os.path.isabs(addr):
            raise ServiceUnavailable(f"service address {server!r}: the socket's path must be absolute")
        return Endpoint("unix", os.path.normpath(addr))
    if network != "tcp":
        raise ServiceUnavailable(f"service address {server!r}: want unix:PATH or tcp:HOST:PORT")
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ServiceUnavailable(f"service address {server!r}: want tcp:HOST:PORT")
    if token is None:
        token = os.environ.get("NSBOX_TOKEN") or None
    if token is None and os.environ.get("NSBOX_TOKEN_FILE"):
        token = read_token(os.environ["NSBOX_TOKEN_FILE"])
    if token is None:
        raise ServiceUnavailable(
            f"service address {server!r}: a TCP service needs its bearer token: set NSBOX_TOKEN or NSBOX_TOKEN_FILE"
        )
    return Endpoint("tcp", addr, token)


def read_token(path: str) -> str:
    """The token file's first line, under the rules nsbox applies: a
    regular file that its group and others cannot read or write, one line
    of 16 to 4096 bytes."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ServiceUnavailable(f"token file {path}: not a regular file")
            if st.st_mode & 0o077:
                raise ServiceUnavailable(
                    f"token file {path}: mode {st.st_mode & 0o777:04o} lets others read or change it; chmod 600 it"
                )
            data = f.read(4097)
    except OSError as e:
        raise ServiceUnavailable(f"token file {path}: {e.strerror}") from e
    line = data.split(b"\n", 1)[0].strip()
    if len(line) < 16 or len(data) > 4096:
        raise ServiceUnavailable(f"token file {path}: want one line of 16 to 4096 bytes")
    return line.decode("utf-8", "strict")


def configured(server: Optional[str] = None, token: Optional[str] = None) -> Optional[Endpoint]:
    """The service to use: server, else NSBOX_SERVER, else the default
    socket if it exists; None when there is none."""
    if server:
        return parse_server(server, token)
    env = os.environ.get("NSBOX_SERVER")
    if env:
        return parse_server(env, token)
    try:
        if stat.S_ISSOCK(os.stat(DEFAULT_SOCKET).st_mode):
            return Endpoint("unix", DEFAULT_SOCKET)
    except OSError:
        pass
    return None


def binary_candidates() -> List[Path]:
    """Where the nsbox binary is looked for, in order."""
    out: List[Path] = []
    for d in (sysconfig.get_path("scripts"), _user_scripts()):
        if d:
            out.append(Path(d) / "nsbox")
    # The directory of this interpreter (a venv's bin/ when sysconfig
    # says otherwise, e.g. an interpreter run by its full path).
    out.append(Path(sys.executable).parent / "nsbox")
    env = os.environ.get("NSBOX_BIN")
    if env:
        out.append(Path(env))
    which = shutil.which("nsbox")
    if which:
        out.append(Path(which))
    return out


def _user_scripts() -> Optional[str]:
    """The scripts directory of a per-user install (pip's --user)."""
    try:
        return sysconfig.get_path("scripts", f"{os.name}_user")
    except KeyError:
        return None


def find_binary() -> str:
    """The nsbox binary to run (see the module's doc)."""
    seen = []
    for p in binary_candidates():
        if p in seen:
            continue
        seen.append(p)
        if p.is_file() and os.access(p, os.X_OK) and _is_elf(p):
            return str(p)
    raise ServiceUnavailable(
        "no nsbox binary: install the nsbox wheel (make wheel; pip install dist/nsbox-*.whl), "
        "set NSBOX_BIN, or put nsbox on the PATH (looked in: " + ", ".join(map(str, seen)) + ")"
    )


def _is_elf(p: Path) -> bool:
    """True for an executable file (an ELF binary), not a script named
    nsbox that another package installed."""
    try:
        with open(p, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError as e:
        raise NsboxError(f"read {p}: {e.strerror}") from e
