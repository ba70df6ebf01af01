"""The config: one JSON argv element, read without the json module.

A bad config is the supervisor's bug, never the program's: the runner
stops with EXIT_RUNNER before writing anything to the report.
"""

import _ast
import sys
import posix

from .paths import _realpath

EXIT_SYNTAX = 1
EXIT_RUNNER = 125  # bad config or report fd: a supervisor bug, not the program's
EXIT_POLICY = 126
MAX_LINES = 1000  # report lines per phase; more are counted, not written

KNOWN_BUILTINS = frozenset((
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
    "vars", "globals", "locals", "open"))
CONFIG_KEYS = frozenset((
    "mode", "allow", "deny_builtins", "deny_events", "strict_attrs",
    "report_fd", "filename", "writable_dirs"))


def _fail(msg):
    """Stop on a configuration error: the supervisor's bug, never the user's."""
    sys.stderr.write("nsbox runner: %s\n" % msg)
    sys.stderr.flush()
    posix._exit(EXIT_RUNNER)


def _load_config(argv):
    if len(argv) != 2:
        _fail("usage: python -S -s -P <runner .pyc> <config JSON>")
    try:
        c = _json_value(compile(argv[1], "<config>", "eval", _ast.PyCF_ONLY_AST).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        _fail("config is not JSON: %s" % e)
    if not isinstance(c, dict):
        _fail("config is not a JSON object")
    unknown = sorted(set(c) - CONFIG_KEYS)
    if unknown:
        _fail("unknown config keys: %s" % ", ".join(unknown))

    def strings(key):
        v = c.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            _fail("%s: want a list of strings" % key)
        return v

    cfg = _Config()
    cfg.mode = c.get("mode")
    if cfg.mode not in ("run", "check"):
        _fail("mode: want \"run\" or \"check\", not %r" % (cfg.mode,))
    allow = strings("allow")
    # __future__ is a compiler directive, never a way out: always allowed.
    cfg.allow = None if allow is None else frozenset(allow) | {"__future__"}
    cfg.allow_listed = sorted(allow or ())
    cfg.deny_builtins = frozenset(strings("deny_builtins") or ())
    bad = sorted(cfg.deny_builtins - KNOWN_BUILTINS)
    if bad:
        _fail("deny_builtins: unknown names: %s" % ", ".join(bad))
    cfg.deny_events = frozenset(strings("deny_events") or ())
    cfg.strict = c.get("strict_attrs", False)
    if not isinstance(cfg.strict, bool):
        _fail("strict_attrs: want a boolean")
    cfg.fd = c.get("report_fd")
    if not isinstance(cfg.fd, int) or isinstance(cfg.fd, bool) or cfg.fd < 3:
        _fail("report_fd: want an open fd >= 3")
    cfg.filename = c.get("filename") or "<program>"
    if not isinstance(cfg.filename, str):
        _fail("filename: want a string")
    dirs = strings("writable_dirs")
    dirs = ["/workspace", "/tmp"] if dirs is None else dirs
    if not all(d.startswith("/") for d in dirs):
        _fail("writable_dirs: want absolute paths")
    cfg.writable_dirs = dirs
    cfg.writable = tuple(_realpath(d) for d in dirs)
    return cfg


class _Config:
    """The decoded config (attributes set by _load_config)."""


_JSON_NAMES = {"true": True, "false": False, "null": None}


def _json_value(node):
    """The value of a JSON document parsed as a Python expression: objects
    with string keys, arrays, strings, numbers, true, false and null.
    Go's encoding/json writes a subset of Python's literal syntax (it never
    writes \\/ or surrogate-pair escapes), so the compiler's parser reads
    it and the json module is not needed (bound.py)."""
    t = type(node)
    if t is _ast.Constant and type(node.value) in (str, int, float):
        return node.value
    if t is _ast.Name and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if t is _ast.List:
        return [_json_value(e) for e in node.elts]
    if t is _ast.Dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if type(k) is not _ast.Constant or type(k.value) is not str:
                raise ValueError("line %d: object keys must be strings" % node.lineno)
            out[k.value] = _json_value(v)
        return out
    if (t is _ast.UnaryOp and type(node.op) is _ast.USub
            and type(node.operand) is _ast.Constant
            and type(node.operand.value) in (int, float)):
        return -node.operand.value
    raise ValueError("line %d, col %d: not a JSON value" % (
        getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1))
