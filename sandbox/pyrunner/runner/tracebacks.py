"""Tracebacks as python prints them, without the runner's frames (told by
their globals, _RG and _PG: guard.py, invariants 5 and 11)."""

import sys

from .bound import _PG, _as_program, _real_import
from .guard import _RG


def _strip(exc, seen):
    """Unlink the runner's frames from exc's traceback and its chain."""
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        kept, tb = [], exc.__traceback__
        while tb is not None:
            g = tb.tb_frame.f_globals
            if g is not _RG and g is not _PG:
                kept.append(tb)
            tb = tb.tb_next
        for a, b in zip(kept, kept[1:] + [None]):
            a.tb_next = b
        exc.__traceback__ = kept[0] if kept else None
        for sub in getattr(exc, "exceptions", None) or ():  # ExceptionGroup
            if isinstance(sub, BaseException):
                _strip(sub, seen)
        if exc.__cause__ is not None:
            _strip(exc.__cause__, seen)
        exc = exc.__context__


def _print_exception(exc):
    _strip(exc, set())
    hook = sys.excepthook
    if hook is sys.__excepthook__:
        _real_import("traceback").print_exception(type(exc), exc, exc.__traceback__)
    else:
        _as_program(hook, type(exc), exc, exc.__traceback__)
    _as_program(sys.stderr.flush)


def _format_exception(exc):
    """The traceback text of exc (stripped by _print_exception first), as
    traceback prints it."""
    return "".join(_real_import("traceback").format_exception(type(exc), exc, exc.__traceback__))
