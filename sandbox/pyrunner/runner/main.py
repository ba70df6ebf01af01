"""nsbox runner: the Python layer of a sandboxed run (policy and telemetry;
the OS sandbox around this interpreter is the security boundary).

Started as  python3.11 -S -s -P <runner .pyc> <config JSON>  with the
user's program on stdin. The Go package pyrunner documents the protocol;
_main below is the order of a run, each step with its why. Stdlib only,
Python 3.11, built-in and frozen modules only (bound.py).
"""

import _signal
import posix
import sys

from .bound import _ModuleType, _modules
from .config import _fail, _load_config
from .guard import _RG, _State, _hook, _plant_lines
from .report import _Report
from .static import _static
from .tracebacks import _print_exception
from .venvsite import _site
from .views import (_FORMATTER, _attrgetter, _guard_import_module,
                    _guard_importlib_import, _methodcaller, _user_builtins)


def _main():
    # site's work for the root's venv first, as python does before any code
    # (the interpreter runs with -S: venvsite.py).
    _site()
    # The config and the report fd: a problem with either is the
    # supervisor's bug, reported on stderr with EXIT_RUNNER and nothing on
    # the report.
    cfg = _load_config(sys.argv)
    report = _Report(cfg.fd, cfg.max_lines)
    if cfg.mode == "session":
        _fail("mode session: not in this runner yet")
    # The whole program, as bytes; the program then finds stdin at EOF.
    if sys.stdin is None:
        _fail("no stdin: the program arrives on stdin")
    src = sys.stdin.buffer.read()
    # The static check writes every violation and exactly one status line
    # before any of the program runs (guard.py, invariant 4); it exits on
    # violations and syntax errors.
    code, lines = _static(cfg, report, src)
    if cfg.mode == "check":
        sys.exit(0)
    _run(cfg, report, code, lines)


def _run(cfg, report, code, lines):
    """Arm the guard, then run the program as __main__ (guard.py,
    invariants 4 and 5: nothing of the program has run before this)."""
    _State.cfg, _State.report, _State.lines = cfg, report, lines
    _State.user_files = {cfg.filename}
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
        {"object.__getattr__"} if cfg.strict else set())
    _State.ub = _user_builtins(cfg)

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
    _State.running = True
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except KeyboardInterrupt as e:
        _print_exception(e)
        _State.running = False
        # Die of SIGINT, as python does, so the parent sees the signal.
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        posix.kill(posix.getpid(), _signal.SIGINT)
        sys.exit(130)
    except BaseException as e:
        _print_exception(e)
        sys.exit(1)


# Tests load the runner's functions under another name without running it.
if __name__ == "__main__":
    _main()
