"""nsbox runner: the Python layer of a sandboxed run (policy and telemetry;
the OS sandbox around this interpreter is the security boundary).

Started as  python3.11 -S -s -P <runner .pyc> <config JSON>  with the
user's program on stdin. The Go package pyrunner documents the protocol;
in short, _main:
  1. does site's work (venvsite.py), reads the config (config.py) and the
     whole program, as bytes; stdin is then at EOF;
  2. static check (static.py): parse, compile, collect every violation,
     write them to the report fd as JSON lines, then exactly one status
     line; violations: exit without running anything;
  3. run (_run): install the program's builtins (views.py) and the audit
     hook (guard.py; it cannot be removed), exec the program as __main__,
     report runtime violations, and print tracebacks without the runner's
     own frames (tracebacks.py).
Stdlib only, Python 3.11, built-in and frozen modules only (bound.py).
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


def _run(cfg, report, code, lines):
    _State.cfg, _State.report, _State.lines = cfg, report, lines
    _State.user_files = {cfg.filename}
    _State.code_dirs = tuple(sorted(set(cfg.writable)))
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

    main = _ModuleType("__main__")
    main.__dict__["__builtins__"] = _State.ub
    runner_module = _modules["__main__"]
    _RG["_runner_module"] = runner_module  # keep the runner's module alive
    _modules["__main__"] = main  # pickle, dataclasses, typing look the program up here
    sys.argv = [cfg.filename]
    _plant_lines()  # now if linecache is loaded already, else when it is

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


def _main():
    _site()
    cfg = _load_config(sys.argv)
    report = _Report(cfg.fd, cfg.max_lines)
    if sys.stdin is None:
        _fail("no stdin: the program arrives on stdin")
    src = sys.stdin.buffer.read()  # all of it: the program then sees EOF
    code, lines = _static(cfg, report, src)
    if cfg.mode == "check":
        sys.exit(0)
    _run(cfg, report, code, lines)


# Tests load the runner's functions under another name without running it.
if __name__ == "__main__":
    _main()
