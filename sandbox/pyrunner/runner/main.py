"""nsbox runner: the Python layer of a sandboxed run (policy and telemetry;
the OS sandbox around this interpreter is the security boundary).

Started as  python3.11 -S -s -P <runner .pyc> <config JSON>  with the
user's program framed on stdin, then the program's own input. The Go package pyrunner documents the protocol;
_main below is the order of a run, each step with its why. Stdlib only,
Python 3.11, built-in and frozen modules only (bound.py).
"""

import _signal
import sys

from .arm import _arm
from .bound import _real_import
from .config import _fail, _load_config
from .display import _display, _Outputs
from .ending import _end, _exit_code, _freeze
from .jsonw import _dumps
from .mplcache import _seed_matplotlib
from .report import _Report
from .restricted import _load_restricted
from .session import _read_program, _session, _take_stdin
from .static import _static
from .tracebacks import _print_exception
from .venvsite import _site


def _main():
    # site's work for the root's venv first, as python does before any code
    # (the interpreter runs with -S: venvsite.py).
    _site()
    # The config and the report fd: a problem with either is the
    # supervisor's bug, reported on stderr with EXIT_RUNNER and nothing on
    # the report.
    cfg = _load_config(sys.argv)
    report = _Report(cfg.fd, cfg.max_lines)
    if sys.stdin is None:
        _fail("no stdin: the program arrives on stdin")
    # Matplotlib's font cache from the root, before a preload or the
    # program imports matplotlib (mplcache.py).
    if cfg.mode != "check":
        _seed_matplotlib()
    if cfg.mode == "session":
        # The cells come on stdin: the runner keeps a private copy and the
        # program gets /dev/null; then the preloads, then the cells
        # (session.py).
        cellfd = _take_stdin()
        _preload(cfg)
        _session(cfg, report, cellfd)
    # The preloads before the program is read: a sandbox started ahead of
    # its program has them done while it waits, and says so.
    _preload(cfg)
    report.send(_dumps({"kind": "ready"}))
    # The program's frame, as bytes, and nothing more: what follows it on
    # fd 0 is the program's standard input (session.py, _read_program).
    src = _read_program()
    # The static check writes every violation and exactly one status line
    # before any of the program runs (guard.py, invariant 8); it exits on
    # violations and syntax errors.
    codes, lines = _static(cfg, report, src)
    if cfg.mode == "check":
        sys.exit(0)
    _run(cfg, report, codes, lines)


def _preload(cfg):
    """Import the config's preload modules as the runner's own, before the
    hook: the program finds them loaded, as after its own import. Go
    checked that the allowlist allows each. In restricted mode,
    RestrictedPython's compiler first (restricted.py): a sandbox started
    ahead of its program has it loaded too."""
    if cfg.restricted:
        _load_restricted(cfg)
    for name in cfg.preload:
        try:
            _real_import(name)
        except BaseException as e:
            _fail("preload %s: %s: %s" % (name, type(e).__name__, e))


def _run(cfg, report, codes, lines):
    """Arm the guard, then run the program as __main__ (guard.py,
    invariants 8 and 9: nothing of the program has run before this), then
    its displays when asked for (display.py), written as one outputs line
    after the program; then end as python would, without its teardown
    (ending.py)."""
    main = _arm(cfg, report, lines)
    _freeze()
    body, final = codes
    code, sig = 0, 0
    try:
        exec(body, main.__dict__)
        if cfg.outputs:
            out = _Outputs(cfg.max_output)
            value = None if final is None else eval(final, main.__dict__)
            _display(cfg, out, value, final is not None)
            report.send(_dumps(out.line()))
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt as e:
        # Python prints it, ends, then dies of SIGINT, so that the parent
        # sees the signal.
        _print_exception(e)
        code, sig = 130, _signal.SIGINT
    except BaseException as e:
        _print_exception(e)
        code = 1
    _end(main, code, sig)


# Tests load the runner's functions under another name without running it.
if __name__ == "__main__":
    _main()
