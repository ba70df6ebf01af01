"""Arming the guard: the program's module and builtins, the guarded
gadgets, the audit hook (guard.py, invariants 4, 5 and 7). A run arms it
right before its program; a session once, before its first cell."""

import sys

from .bound import _PG, _ModuleType, _modules
from .guard import _RG, _State, _add_source, _hook, _plant_lines
from .network import NET_EVENTS
from .restricted import _restricted_builtins
from .views import (_FORMATTER, _attrgetter, _guard_import_module,
                    _guard_importlib_import, _methodcaller, _user_builtins)



def _program_call(f, /, *args, **kwargs):
    """The code of the function _as_program calls through (bound.py): _arm
    makes a function of it with _PG as globals, so that its frames run
    with the program's builtins (no compile at start-up)."""
    return f(*args, **kwargs)


def _arm(cfg, report, lines):
    """Install the guard and return the program's __main__ module; lines
    are the program's (a run's), or None (a session adds each cell's)."""
    _State.cfg, _State.report = cfg, report
    _State.user_files = {cfg.filename}
    if lines is not None:
        _State.lines = lines
        _add_source(cfg.filename, lines)
    _State.code_dirs = tuple(sorted(set(cfg.writable)))
    # Guarded replacements that module views hand out for these attributes.
    if cfg.allow is not None:
        _State.subst.update({("importlib", "import_module"): _guard_import_module,
                             ("importlib", "__import__"): _guard_importlib_import})
    if cfg.strict:
        _State.subst.update({("operator", "attrgetter"): _attrgetter,
                             ("operator", "methodcaller"): _methodcaller,
                             ("string", "Formatter"): _FORMATTER})
    _State.watch = frozenset(("open", "import", "exec", "compile")) | cfg.deny_events | (
        {"object.__getattr__"} if cfg.strict else set()) | (
        NET_EVENTS if cfg.proxy is not None else set())
    _State.ub = _user_builtins(cfg)
    _State.ub = _restricted_builtins(cfg, _State.ub) if cfg.restricted else _State.ub
    _PG["__builtins__"] = _State.ub
    _PG["call"] = type(_program_call)(_program_call.__code__, _PG, "call")

    # The program's module: its own builtins; registered as __main__, where
    # pickle, dataclasses and typing look the program up.
    main = _ModuleType("__main__")
    main.__dict__["__builtins__"] = _State.ub
    _RG["_runner_module"] = _modules["__main__"]  # keep the runner's module alive
    _modules["__main__"] = main
    sys.argv = [cfg.filename]
    _plant_lines()  # now if linecache is loaded already, else when it is

    # The hook last: it cannot be removed, and from here on every event is
    # the program's.
    sys.addaudithook(_hook)
    return main
