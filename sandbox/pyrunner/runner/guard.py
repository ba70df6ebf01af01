"""The guard: the runner's fence while the program runs.

Here: the audit hook (PEP 578), in two halves. _core, the first, decides
from state captured when it was installed: the denied events, the
extension modules that would undo the layer (RAW_MODULES), and the
runner's functions read-only. _hook, the rest, holds the import checks,
the open checks, the checks on code compiled at run time and, under a
proxy, the network check (network.py). In views.py: what the program is
handed instead of the real thing (its __import__, stubs for denied
builtins and for help, module views, guarded gadgets, the
_posixsubprocess stub). arm.py installs both.

INVARIANTS. Each one, broken, opens a way around the layer that nothing
else reports. They are defended by the bypass suite: after any change to
bound.py, guard.py, views.py, arm.py or main.py, run

    go test -race -count=1 ./sandbox/pyrunner/

(TestBypassAttempts in bypass_test.go, state_test.go, runner_test.go,
internals_test.go, allowlists_test.go; the real interpreter, no
sandbox), then in real sandboxes tests/allowlist_test.go,
tests/runner_state_test.go and tests/site_test.go:

    make build && NSBOX_BIN=$PWD/bin/nsbox go test -tags netgo,osusergo,\
sqlite_omit_load_extension,urfave_cli_no_docs -count=1 \
-run 'Allowlist|RuntimeLayer|CheckCommand|SiteEmulation|RunnerState' ./tests/

1. The first half holds whatever the program reaches. Under a policy that
   hands out sys, gc, inspect or frames (default, datasci) the program
   reaches every object of the runner: its globals, _State, the config,
   every function. So _core and _record keep their state in their
   defaults, set once by _install (arm.py): frozensets, tuples of str,
   ints, builtins and runner functions. They load no global and no
   builtin, have no closure and no keyword-only defaults (a dict), and
   call only what they were given (state_test.go checks their code).
   Setting __code__, __defaults__ or __kwdefaults__ of a function is
   audited, and _core refuses it for every function whose globals are
   the runner's (or _PG). Replacing entries of the runner's globals,
   builtins, posix or sys changes what the rest runs, never what _core
   decides. Classes are not read-only (setting a class attribute raises no
   event): nothing in _core or _record is a class or an instance.
   CPython runs the hook as operator.call bound to _core: a bound method
   of a builtin, which has no attributes and takes none, so __cantrace__
   is never true, no trace or profile function runs inside the hook, and
   none can see or change its locals. _core checks a denied event before
   anything else runs, with no re-entrancy mark or flag to skip it; it
   reports with _record, which writes with the posix.write and fd bound at
   install, without de-duplication or a cap (a set or a count would be
   state to fill; the supervisor keeps a bounded copy). If the report fd
   is no longer the report pipe when a refusal must be reported (the
   program closed or replaced it), _record ends the process with the
   policy exit code and says why on stderr; the supervisor records that.
   What _core raises is never decided by code the program controls: it
   compares exact str from the interpreter, and never calls isinstance,
   a path function or an import.

2. What the first half refuses whoever asks. A denied event fails for
   every frame, the runner's included. An extension module in RAW_MODULES
   (by the name its init function has: a spec named x._ctypes loads
   _ctypes) fails to load unless the allowlist names it: native calls and
   memory (_ctypes), an interpreter without this hook
   (_xxsubinterpreters), CPython's test modules, and, where the policy
   denies subprocess.Popen, _posixsubprocess, whose fork_exec starts a
   process without any audit event. For that one the program finds a
   stub (views.py) registered before anything loads the extension, whose
   fork_exec raises subprocess.Popen. A module loaded before the hook (a
   preload: datasci's numpy loads ctypes, matplotlib loads subprocess)
   stays as it is and is reachable (doc.go, Limits).

3. The rest is advisory where the program reaches the runner. _hook and
   the checks it calls read _State, the config and the runner's globals,
   all of which a program reaches under default: such a program can
   switch off the import check, the write check, the compile check and
   the network check (not the first half). Under strict_attrs nothing of
   the runner is reachable (underscore names, frames, gc and sys are
   refused), and the rest holds as written here.

4. Names bound at start-up. Whatever the rest calls while the program
   runs is bound before the program's first line (bound.py, and the
   module-level names here and in views.py), never looked up at call time
   on a module the program can reach. The lookups left on posix and sys
   (posix.stat and posix.fstat in the open check, sys.stderr,
   sys.getfilesystemencoding) reach modules that only a policy allowing
   os, posix or sys hands over. What is taken on first use
   (importlib.import_module, string.Formatter.get_field, the code of
   ast.parse, linecache) comes from the real modules, and a program that
   swapped it first changes only what its own checked call then runs.

5. Frame identity. A frame is the runner's own if and only if its globals
   are _RG. The shipped runner is one code object (the bundle,
   __init__.py), so all its modules share that one dict. The rest skips
   the runner's frames to find who asked (_origin, _import_origin,
   _where), tracebacks drop them (tracebacks.py), and the frame-attribute
   check lets the runner read frames. Never tell the runner's frames by
   code object, file or function name: the program controls those.

6. Whose import. A module load is the program's when the first frame
   below the import machinery (and below pydoc's, pkgutil's and help's
   functions, which import names they were given: BY_NAME_FILES) is user
   code, however the load was asked for: an import statement, __import__,
   the real builtins.__import__, help("name"). Only library code asking
   for a module loads it unchecked; the frame a load comes from never
   makes the program's own load internal.

7. Re-entrancy (the rest only). The rest's own work raises audit events
   (compiling a string the program compiles, realpath's lstat, importing
   linecache). _State.busy holds the ident of each thread inside _hook,
   and that thread's events pass the rest unchecked until it returns.
   Only _load_linecache drops it early, on purpose, so that the linecache
   import it starts is watched like any other. _core does not look at
   it: denied events and raw modules are refused inside the rest's work
   too.

8. The status line before user code. The program is read whole, as bytes,
   and checked (static.py), and exactly one status line is written,
   before the program's builtins and the hook are installed and its first
   line runs (main.py). The report fd is close-on-exec and written with
   the posix.write bound at start-up; the open check refuses to open it
   again by number, dup or /proc path. So the status line is always the
   runner's. A policy allowing os can write the report fd with os.write
   and forge runtime lines (doc.go, Limits); a line it spoils or leaves
   unfinished is recorded as a violation by the Go parser.

9. The hook is installed right before the program runs, last in _arm, and
   cannot be removed; from then on every event is checked.

10. The rest looks only at the events in _State.watch (_arm sets it;
   _core also watches object.__setattr__ and object.__delattr__): an
   event a check handles must be in it. The fast path (_plain) then
   decides from an event's arguments alone, before any frame is read
   (reading f_code is itself an audited event): it may skip only what the
   arguments prove harmless. Never a denied event; "open" only for an
   absolute str path with no ".", ".." or empty component, outside /proc/
   and /dev/ (so it cannot be the report pipe), and not a write while
   "open" is denied; "import" only of a module the allowlist allows, and
   not the first import of linecache (which plants the program's lines);
   "exec" only when there is no allowlist. "compile", "object.__getattr__"
   and every denied event always get the full check.

11. Sessions (session.py). The hook is armed once, before the first cell:
   threads and handlers of earlier cells may run at any time, so the
   runner's own work between cells (reading a frame, checking and
   compiling a cell) is told apart by frame identity alone (invariant 5):
   its compile events come from _RG frames, its imports have an _RG frame
   as origin. The runner calls the program's objects (a value's repr,
   _repr_html_, figures, sys.stdout) only through _as_program (bound.py),
   from a frame whose globals are _PG and whose builtins are the
   program's: they run, and are checked, as the program, and _where and
   tracebacks skip that frame. In a session every report line after the
   first cell starts can be the program's (doc.go).
"""

import _ast
import posix

from .bound import (_AST, _BOOTSTRAP_GLOBALS, _EXTERNAL_GLOBALS, _PG, _STDLIB, _dict_get,
                    _get_ident, _getframe, _ModuleType, _modules, _real_import)
from .network import NET_EVENTS, _net_refusal
from .paths import _abspath, _fsdecode, _realpath
from .static import _char_col, _check, _import_detail, _relative_detail, _top

_RG = globals()  # a frame whose globals are this dict is the runner's own

# Attribute reads CPython audits ("object.__getattr__"): each yields a frame
# or a code object, and a frame yields every module's globals.
FRAME_ATTRS = frozenset((
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
    "tb_frame", "f_code", "__code__"))
WRITE_FLAGS = posix.O_WRONLY | posix.O_RDWR | posix.O_APPEND | posix.O_CREAT | posix.O_TRUNC
# The import machinery's modules besides importlib._bootstrap and
# _bootstrap_external (which are _frozen_importlib and
# _frozen_importlib_external): their frames are never the one that asked.
MACHINERY_MODULES = frozenset((
    "importlib", "importlib.util", "importlib.machinery", "importlib._abc",
    "importlib.abc"))
# Writable whatever the policy says: nothing is stored there.
WRITABLE_DEVICES = frozenset(("/dev/null", "/dev/stdout", "/dev/stderr"))
_AST_FILE = _STDLIB + "/ast.py"
# The stdlib modules that import a module by a name they were given
# (_import_origin): help() is _sitebuiltins._Helper calling pydoc.
# Extension modules whose load would undo the Python layer, refused by
# _core whoever loads them unless the allowlist names them: native calls
# and memory (_ctypes), a process without an audit event
# (_posixsubprocess.fork_exec: views.py hands a stub instead), an
# interpreter without this hook (_xxsubinterpreters), CPython's test
# modules (raw C API access). A built-in module (the roots' Python has
# _posixsubprocess built in) can be made again through
# BuiltinImporter.create_module without any audit event: doc.go, Limits.
# _ctypes only where the allowlist names no
# package beyond the standard library, none of whose modules imports
# ctypes: pandas and numpy import it whatever they use it for (doc.go,
# Limits).
RAW_MODULES = frozenset((
    "_ctypes", "_ctypes_test", "_posixsubprocess", "_xxsubinterpreters",
    "_xxinterpchannels", "_testcapi", "_testinternalcapi", "_testbuffer",
    "_testclinic", "_testimportmultiple", "_testmultiphase", "_testsinglephase",
    "_xxtestfuzz"))
BY_NAME_FILES = frozenset((_STDLIB + "/pydoc.py", _STDLIB + "/pkgutil.py",
                           "<frozen _sitebuiltins>"))


def _import_name_op():
    """IMPORT_NAME's opcode, without importing opcode: the one instruction
    "import a" has and "a = 1" has not."""
    ops = (set(compile("import a", "", "exec").co_code[::2])
           - set(compile("a = 1", "", "exec").co_code[::2]))
    if len(ops) == 1:
        return ops.pop()
    return _real_import("opcode").opmap["IMPORT_NAME"]  # another bytecode layout


IMPORT_NAME = _import_name_op()


class _State:
    cfg = None
    report = None
    lines = ()
    sources = {}        # filename -> linecache entry of the program's code (each cell's)
    private = set()     # (st_dev, st_ino) of the runner's pipes besides the report
    ub = None           # the user's builtins dict
    user_files = set()  # filenames of user code (the program, user compiles)
    busy = set()        # thread idents inside the hook (no re-entry)
    views = {}          # id(module) -> view
    viewed = {}         # id(view) -> module
    subst = {}          # (module name, attribute) -> guarded replacement
    paths = {}          # code file -> whether it lies in a writable directory
    code_dirs = ()      # where the program can write code files, resolved
    watch = frozenset()  # the events the hook looks at
    import_module = None  # the real importlib.import_module, once importlib is loaded
    base_get_field = None  # the real string.Formatter.get_field, once needed
    ast_parse = None    # the code of the real ast.parse, once ast is loaded
    planted = False     # the program's lines are in linecache's cache
    planting = False    # linecache is being loaded for that


def _is_user(frame):
    """User code: runs with the user's builtins, or was compiled by the user,
    or comes from a file in a writable directory (the root is read-only, so
    any code there was put there by the program)."""
    if frame.f_builtins is _State.ub:
        return True
    name = frame.f_code.co_filename
    if name in _State.user_files:
        return True
    user = _State.paths.get(name)
    if user is None:
        user = False
        if not name.startswith("<"):
            real = _realpath(name)
            user = any(real.startswith(d.rstrip("/") + "/") for d in _State.code_dirs)
        _State.paths[name] = user
    return user


def _is_machinery(frame):
    """Whether frame runs the import machinery's code: importlib's modules,
    told apart by their globals. frame.f_code is an audited attribute in
    3.11 (every read is an event this hook sees), and reading it for each
    frame of each import made the hook a large part of a library import
    (docs/benchmarks.md)."""
    g = frame.f_globals
    if g is _BOOTSTRAP_GLOBALS or g is _EXTERNAL_GLOBALS:
        return True
    name = _dict_get(g, "__name__")  # dict's own get: no subclass code runs here
    if name not in MACHINERY_MODULES:
        return False
    m = _modules.get(name)
    return type(m) is _ModuleType and m.__dict__ is g


def _origin(frame):
    """The frame that asked: skip the runner's and the import machinery's."""
    while frame is not None and (frame.f_globals is _RG or _is_machinery(frame)):
        frame = frame.f_back
    return frame


def _import_origin(frame):
    """Who asked for a module load: "guard" (the guarded __import__ already
    decided), "user" or "internal" (library code importing what it needs).
    A load is the user's when the first frame below the import machinery
    is user code, however it got there (an import statement, __import__,
    the real builtins.__import__): the frame it comes from never makes an
    unchecked import internal. Frames of the modules that import a name
    they were given (pydoc's help and locate, pkgutil.resolve_name) are
    skipped as the machinery's are, so that what help("name") loads is
    checked as the program's."""
    while frame is not None:
        if frame.f_globals is _RG:
            return "guard"
        if not _is_machinery(frame) and not _imports_by_name(frame):
            break
        frame = frame.f_back
    if frame is None or not _is_user(frame):
        return "internal"
    return "user"


def _imports_by_name(frame):
    """Whether frame runs a function of pydoc, pkgutil or _sitebuiltins
    (help), modules that import a module by a name given to them. Their
    module bodies are not: what they import for themselves is theirs."""
    if _is_user(frame):
        return False
    code = frame.f_code
    return code.co_filename in BY_NAME_FILES and code.co_name != "<module>"


def _where(frame):
    """(line, col) in the user's program: the nearest frame of its file,
    else the nearest user frame, else (0, 0)."""
    first = None
    f = frame
    while f is not None:
        if f.f_globals is not _RG and f.f_globals is not _PG:
            if f.f_code.co_filename == _State.cfg.filename:
                first = f
                break
            if first is None and _is_user(f):
                first = f
        f = f.f_back
    if first is None:
        return 0, 0
    line, col = first.f_lineno or 0, 0
    try:
        pos = list(first.f_code.co_positions())[first.f_lasti // 2]
        line, col = pos[0] or line, pos[2] or 0
    except (IndexError, ValueError):
        pass
    if first.f_code.co_filename == _State.cfg.filename:
        col = _char_col(_State.lines, line, col)
    return line, col


def _violate(kind, name, detail, frame):
    if _State.report.full():
        return  # a loop hitting the same refusal: stop paying for positions
    line, col = _where(frame)
    _State.report.runtime_violation(kind, name, line, col, detail)


def _policy_import_error(name, detail, frame, shown=None):
    _violate("import", name, detail, frame)
    return ImportError("import of %r is not allowed by the policy nsbox runs under"
                       % (shown or name), name=name)


def _check_import(name, level, frame):
    """Raise ImportError (and report) unless the policy allows name."""
    allow = _State.cfg.allow
    if allow is None or not isinstance(name, str):
        return
    if level:
        rel = "." * level + name
        raise _policy_import_error(rel, _relative_detail(rel), frame)
    if _top(name) not in allow:
        raise _policy_import_error(_top(name), _import_detail(_State.cfg, _top(name)),
                                   frame, name)


def _underscore_refused(name, frame):
    _violate("attribute", name,
             "attribute %r starts with an underscore: not allowed under "
             "strict_attrs" % name, frame)
    return AttributeError("attribute %r is not available under the policy nsbox "
                          "runs under" % name)


def _frame_refused(name, frame):
    _violate("attribute", name, "attribute %r hands out frames or code: not allowed "
             "under strict_attrs" % name, frame)
    return AttributeError("attribute %r is not available under the policy nsbox "
                          "runs under" % name)


def _report_refused(frame, what="report channel"):
    _violate("event", "open", "the runner's %s is private" % what, frame)
    return PermissionError(13, "the %s is private to nsbox" % what)


def _check_compiled(source, filename, frame):
    """strict_attrs: code compiled at run time meets the static attribute
    rules (user code) or the escape rules (library code generators)."""
    user = frame is not None and _is_user(frame)
    if user and isinstance(filename, (str, bytes)):
        _State.user_files.add(_fsdecode(filename))
    if not _State.cfg.strict:
        return
    try:
        tree = source if isinstance(source, _AST) else compile(
            source, "<unknown>", "exec", _ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return  # compile() itself will say what is wrong
    found = []
    _check(tree, _State.cfg, found, codegen=not user)
    found = [v for v in found if user and v[0] == "attribute" or not user]
    for kind, name, _, _, detail in found:
        _violate(kind, name, detail + " (in code compiled at run time)", frame)
    if found:
        raise PermissionError("code compiled at run time uses %r, which the policy "
                              "nsbox runs under does not allow" % found[0][1])


def _check_open(path, mode, flags, frame):
    if isinstance(path, int):  # an fd: was it checked when opened, or is it the report pipe?
        try:
            st = posix.fstat(path)
        except OSError:
            return
        if (st.st_dev, st.st_ino) == _State.report.ident:
            raise _report_refused(frame)
        if (st.st_dev, st.st_ino) in _State.private:
            raise _report_refused(frame, "cell pipe")
        return
    try:
        p = _abspath(_fsdecode(path))
    except (TypeError, ValueError):
        return
    if p.startswith(("/proc/", "/dev/fd/", "/dev/std")):
        try:
            st = posix.stat(p)
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) == _State.report.ident:
            raise _report_refused(frame)
        if st is not None and (st.st_dev, st.st_ino) in _State.private:
            raise _report_refused(frame, "cell pipe")
    writing = (isinstance(mode, str) and any(c in mode for c in "wxa+")
               or isinstance(flags, int) and flags & WRITE_FLAGS)
    if not writing or "open" not in _State.cfg.deny_builtins or p in WRITABLE_DEVICES:
        return
    real = _realpath(p)
    if any(real == d or real.startswith(d.rstrip("/") + "/") for d in _State.cfg.writable):
        return
    where = ", ".join(_State.cfg.writable_dirs) or "nowhere"
    _violate("builtin", "open", "open(%r) for writing: only %s are writable under "
             "the policy" % (p, where), frame)
    raise PermissionError(13, "writing outside %s is not allowed by the policy nsbox "
                          "runs under" % where, p)


def _check_network(proxy, event, args, frame):
    """Raise PermissionError (and report) for a network route around the
    proxy (network.py)."""
    refused = _net_refusal(proxy, event, args)
    if refused is None:
        return
    name, detail = refused
    _violate("network", name, detail, frame)
    raise PermissionError(13, "%s (the policy nsbox runs under)" % detail)


def _core(event, args, W=frozenset(), D=frozenset(), LINES=(), SETLINE=("", ""),
          RAW=frozenset(), RAWLINE=("", "", "", ""), RG=None, PG=None, REST=None,
          RECORD=None, TYPE=None, FT=None, STR=None, GETFRAME=None, PE=None, VE=None,
          IE=None):
    """The audit hook's first half (invariant 1): the denied events, and the
    runner's functions read-only. Its state is its defaults, set once by
    _arm and immutable (frozensets, tuples of str, and functions whose
    code and defaults are refused here): it reads no global, no builtin
    and nothing a program can change, and it raises before anything else
    runs, so no state of the runner's switches it off. The rest of the
    checks is REST (_hook)."""
    if event not in W:
        return
    if event in D:
        try:
            frame = GETFRAME(1)
        except VE:  # raised by C code with no Python frame (a new thread)
            frame = None
        for name, pre, post in LINES:
            if name == event:
                RECORD(pre, post, frame)
        raise PE("%s is not allowed by the policy nsbox runs under" % event)
    if event == "import" and TYPE(args[0]) is STR and args[0].rpartition(".")[2] in RAW:
        # An extension module that would undo the rest (RAW_MODULES), by
        # the name its init function has: loaded by anyone, refused.
        try:
            frame = GETFRAME(1)
        except VE:
            frame = None
        name = args[0].rpartition(".")[2]
        RECORD(RAWLINE[0] + name + RAWLINE[1], RAWLINE[2] + name + RAWLINE[3], frame)
        raise IE("import of %r is not allowed by the policy nsbox runs under" % name,
                 name=args[0])
    if event == "object.__setattr__" or event == "object.__delattr__":
        # A function's __code__, __defaults__ or __kwdefaults__: the
        # runner's own (its globals, or the program's trampoline's) are
        # what this hook and the checks run.
        obj = args[0]
        if TYPE(obj) is FT and (obj.__globals__ is RG or obj.__globals__ is PG):
            try:
                frame = GETFRAME(1)
            except VE:
                frame = None
            RECORD(SETLINE[0], SETLINE[1], frame)
            raise PE("the runner's functions are read-only under nsbox")
        return
    REST(event, args)


def _record(pre, post, frame, FD=-1, IDENT=(), FSTAT=None, WRITE=None, EXIT=None,
            CODE=1, UB=None, PG=None, OSE=None, MV=None, LOST=b""):
    """Write one violation line for _core: pre, the line number in the
    program (its nearest frame that runs with its builtins), post. Its
    state is its defaults, as _core's. No de-duplication, no cap: a
    count or a set would be state a program can fill; the supervisor
    keeps a bounded copy of the report. If the report fd is no longer
    the report pipe (the program closed or replaced it), the violation
    cannot be told: the process ends at once, with the policy exit code,
    and says why on stderr."""
    line = 0
    f = frame
    while f is not None:
        if f.f_builtins is UB and f.f_globals is not PG:
            line = f.f_lineno or 0
            break
        f = f.f_back
    data = MV(("%s%d%s\n" % (pre, line, post)).encode("ascii"))
    try:
        st = FSTAT(FD)
        if (st.st_dev, st.st_ino) != IDENT:
            raise OSE("the report fd is not the report pipe")
        while data:
            data = data[WRITE(FD, data):]
    except OSE:
        try:
            WRITE(2, LOST)
        finally:
            EXIT(CODE)


def _hook(event, args):
    """The audit hook (PEP 578). Installed before user code runs; Python code
    cannot remove it. It sees every event of every thread."""
    if event not in _State.watch:
        return
    if event in _PLAIN and _plain(event, args):
        return
    tid = _get_ident()
    if tid in _State.busy:
        return  # the hook's own work (ast.parse) raises events too
    _State.busy.add(tid)
    try:
        try:
            frame = _getframe(2)  # called by _core, called by the interpreter
        except ValueError:  # raised by C code with no Python frame (a new thread)
            frame = None
        cfg = _State.cfg
        if cfg.proxy is not None and event in NET_EVENTS:
            _check_network(cfg.proxy, event, args, frame)
        if event == "open":
            _check_open(args[0], args[1], args[2], frame)
        elif frame is None:
            pass
        elif event == "import":
            if (cfg.allow is not None and isinstance(args[0], str)
                    and _top(args[0]) not in cfg.allow and _import_origin(frame) == "user"):
                _check_import(args[0], 0, frame)
        elif event == "exec":
            # importlib runs a module body as
            # _call_with_frames_removed(exec, code, module.__dict__)
            if (frame.f_globals is _BOOTSTRAP_GLOBALS
                    and frame.f_code.co_name == "_call_with_frames_removed"):
                margs = frame.f_locals.get("args") or ()
                name = margs[1].get("__name__") if len(margs) > 1 and isinstance(
                    margs[1], dict) else None
                if (cfg.allow is not None and isinstance(name, str)
                        and _top(name) not in cfg.allow
                        and _import_origin(frame.f_back) == "user"):
                    _check_import(name, 0, frame)
        elif event == "compile":
            # A module's source compiled by importlib is checked as a module
            # load (the "exec" event), not as code compiled at run time; an
            # ast.parse() makes no code (compiling its tree is an event too).
            # The runner compiling a cell (invariant 11) is not the program.
            if (frame.f_globals is not _RG and not _is_machinery(frame)
                    and not _is_ast_parse(frame.f_code)):
                _check_compiled(args[0], args[1], _origin(frame))
        elif event == "object.__getattr__":
            # The reader is the frame right below: library code (traceback,
            # asyncio) may look at frames, the user's code may not.
            if args[1] in FRAME_ATTRS and frame.f_globals is not _RG and _is_user(frame):
                raise _underscore_refused(args[1], frame) if args[1].startswith(
                    "_") else _frame_refused(args[1], frame)
        if event == "import" and args[0] == "linecache" and not _State.planted:
            _load_linecache(tid)
    finally:
        _State.busy.discard(tid)


_PLAIN = frozenset(("open", "import", "exec"))


def _plain(event, args):
    """Whether an open, import or exec event certainly needs nothing, told
    from its arguments alone, before the hook looks at frames: the bulk of
    the events a library import raises (reading its files, loading allowed
    modules). Anything it is not sure of gets the full treatment in _hook;
    what it may skip is invariant 10 above."""
    cfg = _State.cfg
    if event in cfg.deny_events:
        return False
    if event == "open":
        # An absolute path that cannot lead into /proc or /dev (no ".",
        # ".." or empty component) cannot be the report pipe; it needs
        # nothing more unless writes are checked and this is one.
        p, mode, flags = args
        if (type(p) is not str or not p.startswith("/") or "/." in p or "//" in p
                or p.startswith(("/proc/", "/dev/"))):
            return False
        return "open" not in cfg.deny_builtins or not (
            type(mode) is str and any(c in mode for c in "wxa+")
            or type(flags) is int and flags & WRITE_FLAGS)
    allow = cfg.allow
    if event == "import":
        # A module the policy allows is allowed whoever asks (linecache's
        # first import still goes through, to plant the program's lines).
        name = args[0]
        return type(name) is str and (allow is None or _top(name) in allow) and (
            name != "linecache" or _State.planted)
    return allow is None  # exec: only a module load's name is checked


def _is_ast_parse(code):
    """Whether code is the real ast.parse, whose compile event is a parse
    of source that makes no code. The runner does not import ast (bound.py):
    the real one is looked up once a frame claims to be it."""
    if code.co_name != "parse" or code.co_filename != _AST_FILE:
        return False
    if _State.ast_parse is None:
        m = _modules.get("ast")
        f = getattr(m, "parse", None) if type(m) is _ModuleType else None
        _State.ast_parse = getattr(f, "__code__", None)
    return code is _State.ast_parse


def _load_linecache(tid):
    """The program's lines must be in linecache's cache before anything
    asks it for them (tracebacks, warnings, inspect), but importing
    linecache (tokenize, re) would slow every run. So when something first imports it, the
    runner imports it at once, with the hook watching this thread again,
    and plants them; the import that was starting then finds it loaded."""
    if _State.planting:
        return
    _State.planting = True
    _State.busy.discard(tid)
    try:
        _real_import("linecache")
        _plant_lines()
    finally:
        _State.planting = False
        _State.busy.add(tid)


def _plant_lines():
    """The program's code (each cell's, in a session) into linecache's
    cache, once linecache is loaded. Only a real module's real dict is
    written: the program may have replaced either, and the runner must not
    call the program's code from its own frame (invariant 11)."""
    lc = _modules.get("linecache")
    cache = lc.__dict__.get("cache") if type(lc) is _ModuleType else None
    if type(cache) is not dict:
        return
    cache.update(_State.sources)
    _State.planted = True


def _add_source(filename, lines):
    """Record the program's code under filename, for tracebacks."""
    _State.sources[filename] = (sum(len(l) + 1 for l in lines), None,
                                [l + "\n" for l in lines], filename)
    _State.user_files.add(filename)
