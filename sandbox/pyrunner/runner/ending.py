"""The end of a run: the interpreter's own end, without its teardown.

After the program, python itself would join the program's threads, call
its atexit functions, flush sys.stdout and sys.stderr, and then tear the
interpreter down: clear every module, collect, free. The teardown is most
of the time a short run spends after its last line (pandas' modules take
longer to free than a small program takes to run), and none of it is the
program's. So a run ends here instead, in python's order:

  1. the program's non-daemon threads are joined (threading._shutdown);
  2. its atexit functions run (logging's, tempfile's and weakref.finalize's
     are atexit functions too);
  3. its __main__ is cleared and its garbage collected, so that what
     python would release at the end is released: a file the program left
     open is flushed and closed, its __del__ methods run;
  4. sys.stdout and sys.stderr (and the ones python started with) are
     flushed; a flush that fails makes the exit status 120, as python's;
  5. the process closes its stdout, stderr and report descriptors, so that
     the supervisor sees their end before the kernel has freed the
     process's memory, and exits at once (posix._exit): the modules stay
     as they are.

What a program can tell apart: objects it kept alive elsewhere than in
__main__ (in an imported module, in a reference cycle a class closes) are
not finalized at exit. Python does not promise it either ("It is not
guaranteed that __del__() methods are called for objects that still exist
when the interpreter exits", the data model's reference).

Every step calls the program's objects as the program (_as_program: its
threads, atexit functions, finalizers and streams must not be handed the
runner's frame), and a step that raises is reported on stderr as python
reports an exception it ignores at exit, and does not stop the next step.
The garbage collector's generations were frozen before the program ran
(_freeze), so step 3 looks only at what the program allocated.
"""

import _signal
import atexit
import gc
import posix
import sys

from .bound import _as_program, _call_method, _dict_get, _modules
from .guard import _State
from .tracebacks import _print_exception

# Bound now: the program may replace posix._exit or gc.collect, not what
# the runner calls.
_exit = posix._exit
_close = posix.close
_kill = posix.kill
_getpid = posix.getpid
_run_exitfuncs = atexit._run_exitfuncs
_collect = gc.collect
_gc_freeze = gc.freeze

# The status python gives a process whose final flush failed.
EXIT_FLUSH = 120


def _freeze():
    """Move everything allocated so far (the runner, the preloads) out of
    the collector's sight: the program's collections, and the one at its
    end, then scan only what the program itself allocated."""
    _gc_freeze()


def _exit_code(e):
    """The exit status SystemExit(e.code) gives a process: None is 0, an
    integer its low byte, anything else is printed on stderr and is 1."""
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return int.__int__(c) & 0xff
    try:
        _as_program(print, c, file=sys.stderr)
    except BaseException:
        pass
    return 1


def _ignored(what, e):
    """Report an exception a step of the end ignores, as python does."""
    try:
        _as_program(print, "Exception ignored in %s:" % what, file=sys.stderr)
        _print_exception(e)
    except BaseException:
        pass


def _end(main, code, sig=0):
    """End the run with status code (or, when sig is set, by that signal,
    as python re-raises SIGINT after an uncaught KeyboardInterrupt); main
    is the program's module. Never returns."""
    threading = _dict_get(_modules, "threading")
    if threading is not None:
        try:
            _call_method(threading, "_shutdown")
        except BaseException as e:
            _ignored("threading._shutdown", e)
    try:
        _as_program(_run_exitfuncs)
    except BaseException as e:
        _ignored("atexit", e)
    try:
        _as_program(dict.clear, main.__dict__)
        _as_program(_collect)
    except BaseException as e:
        _ignored("the program's module", e)
    if not _flush():
        code = EXIT_FLUSH
    # The runner's own last steps: nothing below is the program's.
    if sig:
        _signal.signal(sig, _signal.SIG_DFL)
        _kill(_getpid(), sig)
    for fd in (1, 2, _State.report.fd):
        try:
            _close(fd)
        except OSError:
            pass  # the program closed it already
    _exit(code)


def _flush():
    """Flush the program's sys.stdout and sys.stderr and the interpreter's
    own; False when one fails (reported on stderr, as python reports it)."""
    ok = True
    seen = []
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        f = getattr(sys, name, None)
        if f is None or any(f is s for s in seen):
            continue
        seen.append(f)
        try:
            _call_method(f, "flush")
        except BaseException as e:
            ok = False
            _ignored("flushing sys.%s" % name, e)
    return ok
