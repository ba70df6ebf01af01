"""Arming the guard: the program's module and builtins, the guarded
gadgets, the audit hook (guard.py, invariants 8, 9 and 11). A run arms it
right before its program; a session once, before its first cell."""

import _operator
import posix
import sys

from .bound import _PG, _getframe, _MethodType, _ModuleType, _modules
from .guard import (RAW_MODULES, _RG, _State, _add_source, _core, _hook, _plant_lines,
                    _record)
from .network import NET_EVENTS
from .report import _esc
from .restricted_guards import _restricted_builtins
from .views import (_FORMATTER, _attrgetter, _guard_import_module,
                    _guard_importlib_import, _methodcaller, _stub_posixsubprocess,
                    _user_builtins)



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
    _stub_posixsubprocess(cfg)

    # The hook last: it cannot be removed, and from here on every event is
    # checked.
    _install(cfg, report)
    return main


def _install(cfg, report):
    """Install the audit hook (guard.py, invariant 1): _core and _record
    made anew with the run's state as their defaults, and handed to
    CPython as operator.call bound to _core. That bound method has no
    attributes of its own and takes none (its __cantrace__ is looked up on
    operator.call, a builtin), so CPython never traces the hook: a trace
    function can neither see nor change its locals."""
    function = type(_core)
    lost = ("nsbox runner: the program closed or replaced the report channel, then "
            "did something the policy refuses: the run ends here\n").encode("ascii")
    record = function(_record.__code__, _RG, "_record", (
        report.fd, report.ident, posix.fstat, posix.write, posix._exit, cfg.exit_policy,
        _State.ub, _PG, OSError, memoryview, lost))
    lines = tuple(
        (e, '{"kind":"event","name":%s,"line":' % _esc(e),
         ',"col":0,"detail":%s}' % _esc("audit event %r is denied by the policy" % e))
        for e in sorted(cfg.deny_events))
    setline = ('{"kind":"event","name":"object.__setattr__","line":',
               ',"col":0,"detail":%s}' % _esc(
                   "the runner's functions are read-only: their code and defaults "
                   "cannot be changed"))
    allow = cfg.allow
    stdlib_only = allow is not None and allow <= sys.stdlib_module_names
    raw = frozenset(n for n in RAW_MODULES if allow is not None and n not in allow
                    and (n != "_ctypes" or stdlib_only and "ctypes" not in allow)
                    or n == "_posixsubprocess" and "subprocess.Popen" in cfg.deny_events)
    rawline = ('{"kind":"import","name":"', '","line":',
               ',"col":0,"detail":"the extension module ',
               ' would undo the policy\'s Python layer: refused whoever loads it"}')
    watch = _State.watch | {"object.__setattr__", "object.__delattr__"}
    core = function(_core.__code__, _RG, "_core", (
        watch, cfg.deny_events, lines, setline, raw, rawline, _RG, _PG, _hook, record,
        type, function, str, _getframe, PermissionError, ValueError, ImportError))
    sys.addaudithook(_MethodType(_operator.call, core))
