"""The config: one JSON argv element, read without the json module.

A bad config is the supervisor's bug, never the program's: the runner
stops with EXIT_RUNNER before writing anything to the report.
"""

import _ast
import builtins
import posix
import sys

from .paths import _realpath

# The one exit code the runner needs before it has read the config; Go's
# pyrunner.ExitRunnerError, which a Go test keeps equal to this one.
EXIT_RUNNER = 125  # bad config or report fd: a supervisor bug, not the program's

# Every key is required: the values, and the constants of the protocol
# (the cap on report lines, the exit codes), all come from Go.
CONFIG_KEYS = frozenset((
    "mode", "allow", "deny_builtins", "deny_events", "strict_attrs",
    "report_fd", "filename", "writable_dirs", "max_violation_lines",
    "exit_policy_violation", "exit_syntax_error", "outputs", "preload",
    "max_output_bytes", "proxy", "python_mode", "restricted_lib"))


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
    missing = sorted(CONFIG_KEYS - set(c))
    if missing:
        _fail("missing config keys: %s" % ", ".join(missing))

    def strings(key):
        """A list of strings, or None for null."""
        v = c[key]
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            _fail("%s: want a list of strings" % key)
        return v

    def integer(key, low, high):
        v = c[key]
        if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
            _fail("%s: want an integer from %d to %d, not %r" % (key, low, high, v))
        return v

    cfg = _Config()
    cfg.mode = c["mode"]
    if cfg.mode not in ("run", "check", "session"):
        _fail("mode: want \"run\", \"check\" or \"session\", not %r" % (cfg.mode,))
    allow = strings("allow")
    # __future__ is a compiler directive, never a way out: always allowed.
    cfg.allow = None if allow is None else frozenset(allow) | {"__future__"}
    cfg.allow_listed = sorted(allow or ())
    # Go decides which builtins a policy may deny; any builtin can be.
    cfg.deny_builtins = frozenset(strings("deny_builtins") or ())
    bad = sorted(n for n in cfg.deny_builtins if n not in builtins.__dict__)
    if bad:
        _fail("deny_builtins: not builtins: %s" % ", ".join(bad))
    cfg.deny_events = frozenset(strings("deny_events") or ())
    cfg.strict = c["strict_attrs"]
    if not isinstance(cfg.strict, bool):
        _fail("strict_attrs: want a boolean")
    # restricted.py: the program compiled by RestrictedPython, imported
    # from restricted_lib (the root's private copy).
    if c["python_mode"] not in ("guarded", "restricted"):
        _fail("python_mode: want \"guarded\" or \"restricted\", not %r" % (c["python_mode"],))
    cfg.restricted = c["python_mode"] == "restricted"
    cfg.restricted_lib = c["restricted_lib"]
    if not isinstance(cfg.restricted_lib, str) or cfg.restricted and not (
            cfg.restricted_lib.startswith("/") and cfg.strict):
        _fail("restricted_lib: want an absolute path, and strict_attrs, in restricted mode")
    cfg.fd = integer("report_fd", 3, 1 << 30)
    cfg.filename = c["filename"]
    if not isinstance(cfg.filename, str) or not cfg.filename:
        _fail("filename: want a non-empty string")
    dirs = strings("writable_dirs")
    if dirs is None or not all(d.startswith("/") for d in dirs):
        _fail("writable_dirs: want a list of absolute paths")
    cfg.writable_dirs = dirs
    cfg.writable = tuple(_realpath(d) for d in dirs)
    cfg.max_lines = integer("max_violation_lines", 1, 1 << 30)
    cfg.exit_policy = integer("exit_policy_violation", 1, 255)
    cfg.exit_syntax = integer("exit_syntax_error", 1, 255)
    cfg.outputs = c["outputs"]
    if not isinstance(cfg.outputs, bool):
        _fail("outputs: want a boolean")
    cfg.preload = strings("preload")
    if cfg.preload is None:
        _fail("preload: want a list of module names")
    for m in cfg.preload:
        if not all(p.isidentifier() and p.isascii() for p in m.split(".")):
            _fail("preload: %r is not a module name" % m)
        if cfg.allow is not None and m.partition(".")[0] not in cfg.allow:
            _fail("preload: %r is not allowed by allow" % m)
    if cfg.preload and cfg.mode == "check":
        _fail("preload: nothing runs in mode check")
    cfg.max_output = integer("max_output_bytes", 1, 1 << 40)
    cfg.proxy = _proxy(c["proxy"])
    return cfg


def _proxy(v):
    """The proxy's address as (IPv4 literal, port), or None for a run
    without network (network.py)."""
    if v is None:
        return None
    if type(v) is str:
        host, sep, port = v.rpartition(":")
        parts = host.split(".")
        if (sep and len(parts) == 4 and port.isascii() and port.isdigit()
                and str(int(port)) == port and 0 < int(port) < 65536
                and all(p.isascii() and p.isdigit() and str(int(p)) == p
                        and int(p) < 256 for p in parts)):
            return host, int(port)
    _fail("proxy: want null or \"IPv4:port\", not %r" % (v,))


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
