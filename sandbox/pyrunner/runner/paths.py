"""Paths without os: os.path's abspath and realpath, and os.fsdecode,
over posix calls bound at start-up (importing os would cost every run).
internals_test.go compares them with os.path on inputs chosen to break
them."""

import sys

from .bound import _fspath, _getcwd, _lstat, _readlink


def _fsdecode(p):
    """os.fsdecode without os."""
    p = _fspath(p)
    if isinstance(p, bytes):
        return p.decode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
    return p


def _abspath(p):
    """os.path.abspath without os: absolute, with "." and ".." resolved
    lexically and repeated slashes folded."""
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    parts = []
    for c in p.split("/"):
        if c == "..":
            if parts:
                parts.pop()
        elif c and c != ".":
            parts.append(c)
    return "/" + "/".join(parts)


def _realpath(p):
    """os.path.realpath (strict=False) without os: symlinks resolved one
    component at a time, ".." applied to what the link before it resolved
    to; a missing component is kept as written; at a symlink loop the rest
    is kept unresolved."""
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    path, _ = _resolve("/", p, {})
    return _abspath(path)


def _resolve(path, rest, seen):
    """Resolve the components of rest onto path (absolute, resolved). seen
    maps each link met to what it resolved to, None while resolving it.
    Returns the path and False when a loop stopped the resolution."""
    if rest.startswith("/"):
        path = "/"
    parts = rest.split("/")
    for i, name in enumerate(parts):
        if not name or name == ".":
            continue
        if name == "..":
            path = path.rpartition("/")[0] or "/"
            continue
        new = path.rstrip("/") + "/" + name
        try:
            link = _lstat(new).st_mode & 0o170000 == 0o120000
            target = _readlink(new) if link else None
        except OSError:
            link = False
        if not link:
            path = new
            continue
        if new in seen:
            if seen[new] is not None:
                path = seen[new]
                continue
            return new + "/" + "/".join(parts[i + 1:]), False
        seen[new] = None
        path, ok = _resolve(path, target, seen)
        if not ok:
            return path + "/" + "/".join(parts[i + 1:]), False
        seen[new] = path
    return path, True
