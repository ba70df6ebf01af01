"""Session mode: one interpreter, many cells. The cells arrive on stdin,
framed (Go's EncodeCell); each is checked and run in the same __main__,
so variables, functions, imports and open files persist, and each ends
with one cell line on the report. _session below is the order, each step
with its why; guard.py's invariant 11 is what changes for the guard.
"""

import _signal
import posix
import sys

from .arm import _arm
from .bound import _as_program, _call_method
from .config import _fail
from .display import _display, _Outputs
from .ending import _exit_code
from .guard import _add_source, _plant_lines, _State
from .jsonw import _clip, _dumps
from .report import EXCEPTION_MAX
from .static import _checked
from .tracebacks import _format_exception, _print_exception

# Go's MaxCellBytes, kept equal by a Go test: a longer frame is malformed.
CELL_MAX = 64 << 20
HEADER_MAX = 64  # "CELL <n> <length>\n" with room to spare
CELL_STATUS = {"ok": "ok", "violations": "policy_violation", "syntax_error": "syntax_error"}


def _session(cfg, report, cellfd):
    """Steps 4 and 5 of a session (main.py did the first three: the config,
    stdin moved to cellfd, the preloads)."""
    # The guard armed once, as a run arms it; the hook stays, and the
    # program's __main__ lives as long as the session.
    main = _arm(cfg, report, None)
    report.send(_dumps({"kind": "ready"}))
    # Between cells SIGINT is ignored: an interrupt meant for a cell that
    # just ended must not end the next, nor the runner. A cell runs with
    # the program's own SIGINT handling (Python's default at first).
    _quiet()
    while True:
        cell = _read_cell(cellfd)
        if cell is None:
            sys.exit(0)  # the caller closed the session
        _cell(cfg, report, main, cell[0], cell[1])


def _take_stdin():
    """The cells' pipe, moved out of the program's reach: a close-on-exec
    copy of stdin for the runner, /dev/null as the program's fd 0 (stdin
    at EOF: a cell has no input), and the guard's open check refusing the pipe by
    /proc path or fd (as for the report)."""
    try:
        fd = posix.dup(0)  # not inheritable: no child of the program gets it
        null = posix.open("/dev/null", posix.O_RDONLY)
        if null != 0:
            posix.dup2(null, 0)
            posix.close(null)
        st = posix.fstat(fd)
    except OSError as e:
        _fail("stdin: %s" % e)
    _State.private.add((st.st_dev, st.st_ino))
    return fd


def _read(fd, n):
    """posix.read, resumed when the program's signal handler raises (a
    handler's exception between cells is printed and forgotten)."""
    while True:
        try:
            return posix.read(fd, n)
        except OSError as e:
            _fail("read cell: %s" % e)
        except BaseException as e:
            _print_quietly(e)


def _read_cell(fd):
    """The next frame, (n, source bytes), or None at the end of input
    between frames. A malformed frame is the caller's bug: EXIT_RUNNER."""
    header = _read_header(fd, _read, "cell frame")
    if header is None:
        return None
    parts = header[:-1].split(b" ")
    if (len(parts) != 3 or parts[0] != b"CELL" or not parts[1].isdigit()
            or not parts[2].isdigit()):
        _fail("cell frame: bad header %r" % header)
    n, left = int(parts[1]), int(parts[2])
    if left > CELL_MAX:
        _fail("cell frame: cell %d has %d bytes, more than %d" % (n, left, CELL_MAX))
    return n, _read_body(fd, _read, left, "cell frame: end of input in cell %d" % n)


def _read_program():
    """A run's program from fd 0, Go's EncodeProgram: "PROGRAM <length>\\n"
    and exactly length bytes. posix.read, never sys.stdin: what follows the
    frame is the program's standard input, and sys.stdin, never read by
    the runner, holds none of it in a buffer. A malformed frame is the
    caller's bug: EXIT_RUNNER."""
    header = _read_header(0, _read_plain, "program frame")
    if header is None:
        _fail("program frame: no program (end of input)")
    parts = header[:-1].split(b" ")
    if len(parts) != 2 or parts[0] != b"PROGRAM" or not parts[1].isdigit():
        _fail("program frame: bad header %r" % header)
    left = int(parts[1])
    if left > CELL_MAX:
        _fail("program frame: %d bytes, more than %d" % (left, CELL_MAX))
    return _read_body(0, _read_plain, left, "program frame: end of input in the program")


def _read_plain(fd, n):
    """posix.read before the program exists: no handler of its can raise."""
    try:
        return posix.read(fd, n)
    except OSError as e:
        _fail("read program: %s" % e)


def _read_header(fd, read, what):
    """A frame's header line, up to and with its newline, a byte at a time
    (nothing after it is read), or None at end of input before it."""
    header = b""
    while not header.endswith(b"\n"):
        b = read(fd, 1)
        if not b:
            if header:
                _fail("%s: end of input in the header %r" % (what, header))
            return None
        header += b
        if len(header) > HEADER_MAX:
            _fail("%s: header too long: %r" % (what, header))
    return header


def _read_body(fd, read, left, short):
    """Exactly left bytes of a frame; short is the failure at end of input."""
    chunks = []
    while left:
        b = read(fd, min(left, 1 << 20))
        if not b:
            _fail(short)
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def _cell(cfg, report, main, n, src):
    """Check and run one cell, then write its line."""
    report.send(_dumps({"kind": "cell-start", "n": n}))
    # Each cell is its own file in tracebacks and linecache, and gets its
    # own violation cap and de-duplication.
    cfg.filename = "<cell %d>" % n
    report.restart()
    out = _Outputs(cfg.max_output)
    line = {"kind": "cell", "n": n}
    try:
        status, codes, lines = _checked(cfg, report, src, cfg.outputs)
        line["status"] = CELL_STATUS[status]
        if status == "ok":
            _State.lines = lines
            _add_source(cfg.filename, lines)
            _plant_lines()
            _run_cell(cfg, main, codes, out, line)
    except BaseException as e:
        # Only a program's signal handler raising into the runner's own
        # steps gets here: the cell's error, as if raised in it.
        _failed(e, line)
    _quiet()  # again: an interrupt may have cut _run_cell's short
    # Everything the cell wrote reaches the pipes before its line does.
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        try:
            _call_method(getattr(sys, name), "flush")
        except BaseException:
            pass
    line["outputs"], line["truncated"] = out.items, out.truncated
    report.send(_dumps(line))


def _run_cell(cfg, main, codes, out, line):
    """Run the checked cell and its displays with the program's SIGINT
    handling; fill line's status, exit code and exception."""
    body, final = codes
    try:
        try:
            _loud()
            exec(body, main.__dict__)
            value = None if final is None else eval(final, main.__dict__)
            if cfg.outputs:
                _display(cfg, out, value, final is not None)
        finally:
            _quiet()
    except KeyboardInterrupt as e:
        line["status"] = "interrupted"
        _print_quietly(e)
    except SystemExit as e:
        # A cell's sys.exit ends the cell, not the session, as in IPython;
        # its code as a process's exit would make it.
        code = _exit_code(e)
        line["status"], line["exit_code"] = "ok" if code == 0 else "error", code
    except BaseException as e:
        _failed(e, line)


def _failed(e, line):
    """An uncaught exception: printed as a run prints it, and described in
    the cell's line."""
    _quiet()
    line["status"] = "error"
    _print_quietly(e)
    line["exception"] = {
        "name": _clip(_text("?", getattr, type(e), "__name__"), EXCEPTION_MAX),
        "value": _clip(_text("<str() failed>", str, e), EXCEPTION_MAX),
        "traceback": _clip(_text("", _format_exception, e), EXCEPTION_MAX, tail=True)}


def _text(fallback, f, *args):
    """f(*args) as the program (it may call the program's code), as an
    exact str, or fallback when that fails."""
    try:
        s = _as_program(f, *args)
        return str.__str__(s) if isinstance(s, str) else fallback
    except BaseException:
        return fallback


def _print_quietly(e):
    try:
        _print_exception(e)
    except BaseException:
        pass  # the program's stderr broke; the cell's line still says what happened


class _Sigint:
    """The program's SIGINT handler while the runner ignores SIGINT."""
    handler = _signal.default_int_handler
    quiet = False


def _quiet():
    """Ignore SIGINT, keeping the program's handler for the next cell.
    Idempotent, and it must happen: an exception a signal handler raises
    meanwhile is dropped and the step retried (before SIG_IGN is set
    nothing has changed; after, no KeyboardInterrupt can come)."""
    while True:
        try:
            if not _Sigint.quiet:
                _Sigint.handler = _signal.getsignal(_signal.SIGINT)
                _Sigint.quiet = True
            _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
            return
        except BaseException:
            continue


def _loud():
    """The program's SIGINT handling back, for a cell (None, a handler set
    from C, is Python's default). An interrupt right after is the cell's."""
    h = _Sigint.handler
    _signal.signal(_signal.SIGINT, _signal.default_int_handler if h is None else h)
    _Sigint.quiet = False
