"""A JSON writer for the report's nested lines (outputs, cells), without
the json module (bound.py): dicts with string keys, lists and tuples,
strings, integers, booleans and None; strings as report.py escapes them
(ASCII only, so a line is bytes as written)."""

from .report import _esc


def _dumps(v):
    """v as compact JSON text (ASCII)."""
    t = type(v)
    if t is str:
        return _esc(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is dict:
        return "{" + ",".join(_esc(k) + ":" + _dumps(x) for k, x in v.items()) + "}"
    if t is list or t is tuple:
        return "[" + ",".join(_dumps(x) for x in v) + "]"
    raise TypeError("jsonw: cannot write %s" % t.__name__)


def _clip(s, limit, tail=False):
    """s shortened, if need be, so that _esc(s) takes at most limit bytes:
    its start kept, or with tail its end, and a mark where it was cut."""
    if len(s) <= limit and len(_esc(s)) <= limit:
        return s
    mark = "\n[... cut by nsbox ...]\n"
    n = min(len(s), limit)  # a character takes at least one byte
    while True:
        cut = (mark + s[len(s) - n:]) if tail else (s[:n] + mark)
        size = len(_esc(cut))
        if size <= limit or n == 0:
            return cut
        n = min(n - 1, n * limit // size)  # escapes take up to 12 bytes a character
