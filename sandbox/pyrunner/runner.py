# nsbox runner: the Python layer of a sandboxed run (policy and telemetry;
# the OS sandbox around this interpreter is the security boundary).
#
# Started as:  python3.11 -S -s -P <runner .pyc> <config JSON>
# (or -c <this file>) with the user's program on stdin. The Go package
# pyrunner documents the protocol; in short:
#   1. read the config and the whole program (bytes); stdin is then at EOF;
#   2. static check: parse, compile, collect every violation, write them to
#      the report fd as JSON lines, then exactly one status line;
#      violations: exit 126 without running anything;
#   3. run: install an audit hook (PEP 578; it cannot be removed), build the
#      user's builtins (guarded __import__, denied builtins replaced by stubs),
#      exec the program as __main__, report runtime violations, and print
#      tracebacks without the runner's own frames.
# Stdlib only, Python 3.11. What the checks rely on is bound here at
# start-up, so monkey-patching a module later does not change it.
#
# Start-up cost is the cost of every sandboxed run, so the runner imports
# only built-in and frozen modules (posix, not os; _ast, not ast; no json,
# re, tokenize, linecache or traceback: those cost 20-30 ms together) and
# does site's work for nsbox's venv itself (-S). What it needs only on a
# rare path it takes when that path comes: tokenize for a coding cookie,
# traceback to print one, linecache when something imports it, and, from
# the real modules once the program has them, importlib.import_module and
# string.Formatter's get_field (a program that swaps those first only
# changes what its own checked call then runs).

import _ast
import _operator
import _signal
import _sitebuiltins
import _string
import _thread
import builtins
import posix
import sys

_RG = globals()  # a frame whose globals are this dict is the runner's own

EXIT_SYNTAX = 1
EXIT_RUNNER = 125  # bad config or report fd: a supervisor bug, not the program's
EXIT_POLICY = 126
MAX_LINES = 1000  # report lines per phase; more are counted, not written

KNOWN_BUILTINS = frozenset((
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
    "vars", "globals", "locals", "open"))
CONFIG_KEYS = frozenset((
    "mode", "allow", "deny_builtins", "deny_events", "strict_attrs",
    "report_fd", "filename", "writable_dirs"))
# Names that hand out the interpreter's machinery (strict_attrs, static).
HIDDEN_NAMES = frozenset(("__builtins__", "__loader__", "__spec__"))
# Attributes that lead from any object to frames, code, globals or every
# class: refused in code that libraries compile at run time (typing's
# ForwardRef, dataclasses) under strict_attrs. Library code generators use
# only __class__, __qualname__, __setattr__ and __delattr__.
ESCAPE_ATTRS = frozenset((
    "__subclasses__", "__globals__", "__builtins__", "__bases__", "__base__",
    "__mro__", "__code__", "__closure__", "__func__", "__self__", "__dict__",
    "__getattribute__", "__reduce__", "__reduce_ex__", "__loader__",
    "__spec__", "__traceback__", "__import__", "gi_frame", "gi_code",
    "cr_frame", "cr_code", "ag_frame", "ag_code", "tb_frame", "f_back",
    "f_globals", "f_builtins", "f_locals", "f_code"))
CODEGEN_NAMES = frozenset((
    "__import__", "__builtins__", "eval", "exec", "compile", "getattr",
    "setattr", "delattr", "globals", "locals", "vars", "breakpoint", "open"))
# Attribute reads CPython audits ("object.__getattr__"): each yields a frame
# or a code object, and a frame yields every module's globals.
FRAME_ATTRS = frozenset((
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
    "tb_frame", "f_code", "__code__"))
# Dunders a module view serves to the interpreter itself (import-from
# fallback, star import, dir); the static check keeps user code off them.
VIEW_DUNDERS = frozenset((
    "__name__", "__doc__", "__all__", "__file__", "__path__", "__package__",
    "__version__"))
WRITE_FLAGS = posix.O_WRONLY | posix.O_RDWR | posix.O_APPEND | posix.O_CREAT | posix.O_TRUNC
# The import machinery's modules besides importlib._bootstrap and
# _bootstrap_external (which are _frozen_importlib and
# _frozen_importlib_external): their frames are never the one that asked.
MACHINERY_MODULES = frozenset((
    "importlib", "importlib.util", "importlib.machinery", "importlib._abc",
    "importlib.abc"))
# Writable whatever the policy says: nothing is stored there.
WRITABLE_DEVICES = frozenset(("/dev/null", "/dev/stdout", "/dev/stderr"))

_write = posix.write
_lstat = posix.lstat
_readlink = posix.readlink
_getcwd = posix.getcwd
_fspath = posix.fspath
_getframe = sys._getframe
_get_ident = _thread.get_ident
_real_import = builtins.__import__
_real_attrgetter = _operator.attrgetter
_real_methodcaller = _operator.methodcaller
_field_split = _string.formatter_field_name_split
_ModuleType = type(sys)
_AST = _ast.AST
_modules = sys.modules
# importlib._bootstrap, which the interpreter loads at start-up.
_bootstrap_resolve = _modules["_frozen_importlib"]._resolve_name
_BOOTSTRAP_GLOBALS = vars(_modules["_frozen_importlib"])
_EXTERNAL_GLOBALS = vars(_modules["_frozen_importlib_external"])
_dict_get = dict.get
_STDLIB = getattr(sys, "_stdlib_dir", None) or "%s/%s/python%d.%d" % (
    sys.base_prefix, sys.platlibdir, sys.version_info[0], sys.version_info[1])
_AST_FILE = _STDLIB + "/ast.py"


def _import_name_op():
    """IMPORT_NAME's opcode, without importing opcode: the one instruction
    "import a" has and "a = 1" has not."""
    ops = (set(compile("import a", "", "exec").co_code[::2])
           - set(compile("a = 1", "", "exec").co_code[::2]))
    if len(ops) == 1:
        return ops.pop()
    return _real_import("opcode").opmap["IMPORT_NAME"]  # another bytecode layout


IMPORT_NAME = _import_name_op()


def _fail(msg):
    """Stop on a configuration error: the supervisor's bug, never the user's."""
    sys.stderr.write("nsbox runner: %s\n" % msg)
    sys.stderr.flush()
    posix._exit(EXIT_RUNNER)


# ---------------------------------------------------------------- config

def _load_config(argv):
    if len(argv) != 2:
        _fail("usage: python -c <runner> <config JSON>")
    try:
        c = _json_value(compile(argv[1], "<config>", "eval", _ast.PyCF_ONLY_AST).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        _fail("config is not JSON: %s" % e)
    if not isinstance(c, dict):
        _fail("config is not a JSON object")
    unknown = sorted(set(c) - CONFIG_KEYS)
    if unknown:
        _fail("unknown config keys: %s" % ", ".join(unknown))

    def strings(key):
        v = c.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            _fail("%s: want a list of strings" % key)
        return v

    cfg = _Config()
    cfg.mode = c.get("mode")
    if cfg.mode not in ("run", "check"):
        _fail("mode: want \"run\" or \"check\", not %r" % (cfg.mode,))
    allow = strings("allow")
    # __future__ is a compiler directive, never a way out: always allowed.
    cfg.allow = None if allow is None else frozenset(allow) | {"__future__"}
    cfg.allow_listed = sorted(allow or ())
    cfg.deny_builtins = frozenset(strings("deny_builtins") or ())
    bad = sorted(cfg.deny_builtins - KNOWN_BUILTINS)
    if bad:
        _fail("deny_builtins: unknown names: %s" % ", ".join(bad))
    cfg.deny_events = frozenset(strings("deny_events") or ())
    cfg.strict = c.get("strict_attrs", False)
    if not isinstance(cfg.strict, bool):
        _fail("strict_attrs: want a boolean")
    cfg.fd = c.get("report_fd")
    if not isinstance(cfg.fd, int) or isinstance(cfg.fd, bool) or cfg.fd < 3:
        _fail("report_fd: want an open fd >= 3")
    cfg.filename = c.get("filename") or "<program>"
    if not isinstance(cfg.filename, str):
        _fail("filename: want a string")
    dirs = strings("writable_dirs")
    dirs = ["/workspace", "/tmp"] if dirs is None else dirs
    if not all(d.startswith("/") for d in dirs):
        _fail("writable_dirs: want absolute paths")
    cfg.writable_dirs = dirs
    cfg.writable = tuple(_realpath(d) for d in dirs)
    return cfg


class _Config:
    """The decoded config (attributes set by _load_config)."""


_JSON_NAMES = {"true": True, "false": False, "null": None}


def _json_value(node):
    """The value of a JSON document parsed as a Python expression: objects
    with string keys, arrays, strings, numbers, true, false and null.
    Go's encoding/json writes a subset of Python's literal syntax (it never
    writes \\/ or surrogate-pair escapes), so the compiler's parser reads
    it and the json module (3-4 ms to import) is not needed."""
    t = type(node)
    if t is _ast.Constant and type(node.value) in (str, int, float):
        return node.value
    if t is _ast.Name and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if t is _ast.List:
        return [_json_value(e) for e in node.elts]
    if t is _ast.Dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if type(k) is not _ast.Constant or type(k.value) is not str:
                raise ValueError("line %d: object keys must be strings" % node.lineno)
            out[k.value] = _json_value(v)
        return out
    if (t is _ast.UnaryOp and type(node.op) is _ast.USub
            and type(node.operand) is _ast.Constant
            and type(node.operand.value) in (int, float)):
        return -node.operand.value
    raise ValueError("line %d, col %d: not a JSON value" % (
        getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1))


# ---------------------------------------------------------------- paths

def _fsdecode(p):
    """os.fsdecode without os."""
    p = _fspath(p)
    if isinstance(p, bytes):
        return p.decode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
    return p


def _abspath(p):
    """os.path.abspath without os: absolute, with "." and ".." resolved
    lexically and repeated slashes folded."""
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    parts = []
    for c in p.split("/"):
        if c == "..":
            if parts:
                parts.pop()
        elif c and c != ".":
            parts.append(c)
    return "/" + "/".join(parts)


def _realpath(p):
    """os.path.realpath (strict=False) without os: symlinks resolved one
    component at a time, ".." applied to what the link before it resolved
    to; a missing component is kept as written; at a symlink loop the rest
    is kept unresolved."""
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    path, _ = _resolve("/", p, {})
    return _abspath(path)


def _resolve(path, rest, seen):
    """Resolve the components of rest onto path (absolute, resolved). seen
    maps each link met to what it resolved to, None while resolving it.
    Returns the path and False when a loop stopped the resolution."""
    if rest.startswith("/"):
        path = "/"
    parts = rest.split("/")
    for i, name in enumerate(parts):
        if not name or name == ".":
            continue
        if name == "..":
            path = path.rpartition("/")[0] or "/"
            continue
        new = path.rstrip("/") + "/" + name
        try:
            link = _lstat(new).st_mode & 0o170000 == 0o120000
            target = _readlink(new) if link else None
        except OSError:
            link = False
        if not link:
            path = new
            continue
        if new in seen:
            if seen[new] is not None:
                path = seen[new]
                continue
            return new + "/" + "/".join(parts[i + 1:]), False
        seen[new] = None
        path, ok = _resolve(path, target, seen)
        if not ok:
            return path + "/" + "/".join(parts[i + 1:]), False
        seen[new] = path
    return path, True


# ---------------------------------------------------------------- site

def _site():
    """What site.main() does for an nsbox root, which has a venv (/venv,
    include-system-site-packages = false, no .pth file, no sitecustomize):
    the venv's prefix and site-packages, and the builtins site adds (exit,
    quit, help, copyright, credits, license). Anything else, or a layout
    this does not recognise, gets the real site.main(). The interpreter
    runs with -S because site imports os and parses every .pth file: 2-3 ms
    per run. sys.flags.no_site is 1 either way."""
    if not _venv_site():
        _real_import("site").main()
        return
    eof = "Ctrl-D (i.e. EOF)"
    builtins.quit = _sitebuiltins.Quitter("quit", eof)
    builtins.exit = _sitebuiltins.Quitter("exit", eof)
    builtins.copyright = _printer("copyright", sys.copyright, ())
    builtins.credits = _printer("credits", """\
    Thanks to CWI, CNRI, BeOpen.com, Zope Corporation and a cast of thousands
    for supporting Python development.  See www.python.org for more information.""", ())
    builtins.license = _printer(
        "license", "See https://www.python.org/psf/license/",
        [d + "/" + f for d in (_STDLIB + "/..", _STDLIB, ".")
         for f in ("LICENSE.txt", "LICENSE")])
    builtins.help = _sitebuiltins._Helper()


def _printer(name, data, filenames):
    """A _sitebuiltins._Printer as its constructor would make it; the
    constructor imports os (1.5 ms) for os.path.join."""
    p = _sitebuiltins._Printer.__new__(_sitebuiltins._Printer)
    p._Printer__name, p._Printer__data = name, data
    p._Printer__lines, p._Printer__filenames = None, list(filenames)
    return p


def _isdir(p):
    try:
        return posix.stat(p).st_mode & 0o170000 == 0o040000
    except OSError:
        return False


def _venv_site():
    """Set up the venv as site.venv() would; False (nothing changed) if the
    interpreter is not in a venv of the shape nsbox builds."""
    exe_dir = _abspath(sys.executable).rpartition("/")[0]
    prefix = exe_dir.rpartition("/")[0]
    try:
        posix.stat(exe_dir + "/pyvenv.cfg")
        return False  # site would read this one first
    except OSError:
        pass
    try:
        with open(prefix + "/pyvenv.cfg", encoding="utf-8") as f:
            conf = f.read()
    except OSError:
        return False
    system_site, home = "true", None
    for line in conf.splitlines():
        key, eq, value = line.partition("=")
        if not eq:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "include-system-site-packages":
            system_site = value.lower()
        elif key == "home":
            home = value
    if system_site == "true":
        return False
    ver = "python%d.%d" % sys.version_info[:2]
    site = prefix + "/lib/" + ver + "/site-packages"
    # Debian's site also looks in these; nsbox's roots have none of them.
    for d in (prefix + "/local/lib/" + ver + "/dist-packages",
              prefix + "/lib/python3/dist-packages",
              prefix + "/lib/" + ver + "/dist-packages"):
        if _isdir(d):
            return False
    try:
        names = posix.listdir(site)
    except OSError:
        return False
    if any(n.endswith(".pth") and not n.startswith(".") for n in names):
        return False  # .pth files are site's to run
    sys.prefix = sys.exec_prefix = prefix
    sys._home = home
    if site not in sys.path:
        sys.path.append(site)
    # site imports sitecustomize when there is one: leave that to site too.
    if _modules["_frozen_importlib_external"].PathFinder.find_spec("sitecustomize") is not None:
        sys.path.remove(site)
        sys.prefix, sys.exec_prefix = sys.base_prefix, sys.base_exec_prefix
        return False
    return True


# ---------------------------------------------------------------- JSON strings

_ESC = {i: "\\u%04x" % i for i in (*range(32), 0x7f)}
_ESC.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n",
             ord("\r"): "\\r", ord("\t"): "\\t", ord("\b"): "\\b",
             ord("\f"): "\\f"})


def _esc(s):
    """s as a JSON string of ASCII characters (json's
    encode_basestring_ascii, without importing json)."""
    s = s.translate(_ESC)
    if not s.isascii():
        s = "".join(c if c < "\x80" else _uesc(ord(c)) for c in s)
    return '"' + s + '"'


def _uesc(n):
    if n < 0x10000:
        return "\\u%04x" % n
    n -= 0x10000
    return "\\u%04x\\u%04x" % (0xd800 | (n >> 10), 0xdc00 | (n & 0x3ff))


# ---------------------------------------------------------------- report

class _Report:
    """The report channel: a private fd, written with posix.write bound at
    start-up. Runtime lines are de-duplicated and capped so a loop cannot
    fill the pipe."""

    def __init__(self, fd):
        try:
            st = posix.fstat(fd)
            posix.set_inheritable(fd, False)  # no child process gets it
        except OSError as e:
            _fail("report_fd %d: %s" % (fd, e))
        self.fd = fd
        self.ident = (st.st_dev, st.st_ino)
        self.seen = set()
        self.runtime = 0

    def line(self, pairs):
        text = ",".join(
            _esc(k) + ":" + (_esc(v) if isinstance(v, str) else str(int(v)))
            for k, v in pairs)
        try:
            _write(self.fd, ("{" + text + "}\n").encode("ascii"))
        except OSError:
            pass  # telemetry: a closed reader must not break the program

    def violation(self, kind, name, line, col, detail):
        self.line((("kind", kind), ("name", name), ("line", line),
                   ("col", col), ("detail", detail)))

    def runtime_violation(self, kind, name, line, col, detail):
        key = (kind, name, line, col)
        if key in self.seen or self.runtime >= MAX_LINES:
            return
        self.seen.add(key)
        self.runtime += 1
        self.violation(kind, name, line, col, detail)


# ---------------------------------------------------------------- static check

def _walk(tree):
    """ast.walk without ast: every node, breadth first, in ast.walk's order."""
    todo = [tree]
    i = 0
    while i < len(todo):
        n = todo[i]
        i += 1
        for f in n._fields:
            v = getattr(n, f, None)
            if isinstance(v, _AST):
                todo.append(v)
            elif isinstance(v, list):
                todo.extend(x for x in v if isinstance(x, _AST))
        yield n


def _literal(node):
    """The value of a string literal, folding "a" + "b"; None otherwise."""
    parts, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, _ast.BinOp) and isinstance(n.op, _ast.Add):
            stack.append(n.right)
            stack.append(n.left)
        elif isinstance(n, _ast.Constant) and isinstance(n.value, str):
            parts.append(n.value)
        else:
            return None
    return "".join(parts)


def _is_dunder(s):
    return (len(s) > 4 and s.startswith("__") and s.endswith("__")
            and s.isidentifier() and s != "__main__")


def _top(name):
    return name.partition(".")[0]


def _allowed_text(cfg):
    names = cfg.allow_listed
    if not names:
        return "nothing"
    if len(names) <= 8:
        return ", ".join(names)
    return "%s, ... (%d in all)" % (", ".join(names[:8]), len(names))


def _import_detail(cfg, name):
    return "import of %r is not allowed by the policy (allowed: %s)" % (
        name, _allowed_text(cfg))


def _relative_detail(name):
    return ("relative import %r is not allowed: the program is not part of "
            "a package" % name)


def _check(tree, cfg, out, codegen=False):
    """Append (kind, name, line, bytecol, detail) for every violation in tree.

    codegen: the tree is code a library compiles at run time (strict_attrs
    only); then what counts is imports, eval-like names it does not bind
    itself, and attributes that lead to internals, not the policy's lists."""
    allow = None if codegen else cfg.allow
    strict = cfg.strict
    deny = frozenset() if codegen else cfg.deny_builtins - {"open"}
    # Names bound to importlib, and to its import functions; in generated
    # code, the names it binds itself (a namedtuple field may be "locals").
    il_mods, il_funcs, bound = set(), set(), set()
    for n in _walk(tree):
        if codegen and isinstance(n, _ast.arg):
            bound.add(n.arg)
        elif codegen and isinstance(n, _ast.Name) and not isinstance(n.ctx, _ast.Load):
            bound.add(n.id)
        if isinstance(n, _ast.Import):
            for a in n.names:
                if a.name == "importlib":
                    il_mods.add(a.asname or a.name)
        elif isinstance(n, _ast.ImportFrom) and n.module == "importlib" and not n.level:
            for a in n.names:
                if a.name in ("import_module", "__import__"):
                    il_funcs.add(a.asname or a.name)

    def add(kind, name, node, detail, line=None, col=None):
        out.append((kind, name, node.lineno if line is None else line,
                    node.col_offset if col is None else col, detail))

    def module(name, node, level=0):
        if codegen:
            add("import", name or ".", node, "import in code compiled at run time")
            return
        if allow is None or name is None and not level:
            return
        if level or name.startswith("."):
            rel = "." * level + (name or "")
            add("import", rel, node, _relative_detail(rel))
        elif _top(name) not in allow:
            add("import", _top(name), node, _import_detail(cfg, _top(name)))

    def attr(name, node, what, line=None, col=None):
        add("attribute", name, node,
            "%s %r starts with an underscore: not allowed under strict_attrs"
            % (what, name), line, col)

    for n in _walk(tree):
        if isinstance(n, _ast.Import):
            for a in n.names:
                module(a.name, a)
        elif isinstance(n, _ast.ImportFrom):
            module(n.module, n, n.level)
            if strict:
                for a in n.names:
                    if a.name.startswith("_") and n.module != "__future__":
                        attr(a.name, a, "imported name")
        elif isinstance(n, _ast.Call):
            f = n.func
            lit = _literal(n.args[0]) if n.args else None
            # __import__("x"), importlib.import_module("x"), importlib.__import__("x")
            if lit is not None and (
                    isinstance(f, _ast.Name) and (f.id == "__import__" or f.id in il_funcs)
                    or isinstance(f, _ast.Attribute) and isinstance(f.value, _ast.Name)
                    and f.value.id in il_mods and f.attr in ("import_module", "__import__")):
                level = 0
                for k in n.keywords:
                    if k.arg == "level" and isinstance(k.value, _ast.Constant):
                        level = k.value.value if isinstance(k.value.value, int) else 0
                if lit.startswith(".") and len(n.args) > 1 and _literal(n.args[1]):
                    lit = _literal(n.args[1])  # import_module(".x", "pkg"): pkg's top
                module(lit, n, level)
            # getattr(o, "_x") and its family, with a (folded) literal name
            if (strict and isinstance(f, _ast.Name) and len(n.args) > 1
                    and f.id in ("getattr", "setattr", "delattr", "hasattr")):
                name = _literal(n.args[1])
                plain = isinstance(n.args[1], _ast.Constant)
                if name and name.startswith("_") and not (plain and _is_dunder(name)):
                    attr(name, n, "attribute")
        elif isinstance(n, _ast.Name):
            if isinstance(n.ctx, _ast.Load) and n.id in deny:
                add("builtin", n.id, n,
                    "%r is not available under the policy" % n.id)
            if codegen and n.id in CODEGEN_NAMES and n.id not in bound:
                add("builtin", n.id, n, "%r in code compiled at run time" % n.id)
            elif strict and n.id in HIDDEN_NAMES:
                add("attribute", n.id, n,
                    "name %r reaches the interpreter's internals: not allowed "
                    "under strict_attrs" % n.id)
        elif isinstance(n, _ast.Attribute) and strict:
            # Point at the name after the dot, not at the whole expression.
            line, col = n.end_lineno, n.end_col_offset - len(n.attr.encode("utf-8"))
            if codegen and n.attr in ESCAPE_ATTRS:
                add("attribute", n.attr, n, "attribute %r leads to the "
                    "interpreter's internals" % n.attr, line, col)
            elif not codegen and n.attr.startswith("_"):
                attr(n.attr, n, "attribute", line, col)
        elif isinstance(n, _ast.MatchClass) and strict and not codegen:
            for k in n.kwd_attrs:  # case C(__class__=x) reads an attribute
                if k.startswith("_"):
                    attr(k, n, "attribute")
        elif (isinstance(n, _ast.Constant) and strict and not codegen
              and isinstance(n.value, str) and _is_dunder(n.value)):
            # "__module__", "__annotations__" as keys of a class namespace
            add("attribute", n.value, n,
                "string %r names a special attribute: not allowed under "
                "strict_attrs" % n.value)


# ---------------------------------------------------------------- source text

def _decode(src):
    try:
        # A coding cookie can only be in the first two lines; without one
        # the source is UTF-8 (and tokenize, 5 ms to import, is not needed).
        if b"coding" in b"\n".join(src.split(b"\n", 2)[:2]):
            enc, _ = _real_import("tokenize").detect_encoding(
                iter(src.splitlines(True)).__next__)
        else:
            enc = "utf-8-sig" if src.startswith(b"\xef\xbb\xbf") else "utf-8"
        return src.decode(enc)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return src.decode("utf-8", "replace")


def _char_col(lines, line, bytecol):
    """Turn an ast byte offset into a character offset on that line."""
    if bytecol is None:
        return 0
    if 0 < line <= len(lines):
        return len(lines[line - 1].encode("utf-8")[:bytecol].decode("utf-8", "replace"))
    return bytecol


# ---------------------------------------------------------------- runtime

class _State:
    cfg = None
    report = None
    lines = ()
    ub = None           # the user's builtins dict
    running = False     # set right before the program starts
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
    frame of each import made the hook cost ~10 us per event, 20 ms of an
    `import pandas`."""
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
    decided), "user" or "internal". A load that C code makes on the user's
    behalf (datetime.strptime importing _strptime) is internal: it names a
    fixed module, and the real __import__ is out of the user's reach."""
    entry = None  # the outermost machinery frame so far
    while frame is not None:
        if frame.f_globals is _RG:
            return "guard"
        if not _is_machinery(frame):
            break
        entry = frame
        frame = frame.f_back
    if frame is None or not _is_user(frame):
        return "internal"
    if frame.f_code.co_code[frame.f_lasti] == IMPORT_NAME:
        return "user"  # an import statement run with the real __import__
    return "user" if entry is not None and entry.f_code.co_name not in (
        "_find_and_load", "_handle_fromlist") else "internal"


def _where(frame):
    """(line, col) in the user's program: the nearest frame of its file,
    else the nearest user frame, else (0, 0)."""
    first = None
    f = frame
    while f is not None:
        if f.f_globals is not _RG:
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
    if _State.report.runtime >= MAX_LINES:
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


def _guard_import(name, globals=None, locals=None, fromlist=(), level=0):
    """The __import__ the user's code sees: import statements, __import__()
    calls, code the user execs. Every call comes from user code."""
    caller = _getframe(1)
    statement = caller.f_code.co_code[caller.f_lasti] == IMPORT_NAME
    if (not statement and level == 0 and type(fromlist) is list and not fromlist
            and globals is locals is caller.f_globals):
        # PyImport_Import: C code called by the user's code imports a fixed
        # helper (datetime.strptime needs _strptime, copy needs copyreg)
        # through the caller's __import__, then takes the module from
        # sys.modules and ignores what this returns. Load it unchecked; the
        # caller gets None. (User code mimicking the call gets None too.)
        _real_import(name, globals, locals, fromlist, level)
        return None
    if "__import__" in _State.cfg.deny_builtins and not statement:
        raise _denied("__import__", caller)
    _check_import(name, level, caller)
    return _hand_over(_real_import(name, globals, locals, fromlist, level))


def _guard_import_module(name, package=None):
    """importlib.import_module, as the user sees it."""
    if isinstance(name, str) and name.startswith(".") and package:
        name = _resolve_name(name, package)
    _check_import(name, 0, _getframe(1))
    return _hand_over(_State.import_module(name, package))


def _resolve_name(name, package):
    """importlib.util.resolve_name for a relative name and a package,
    without importing importlib.util."""
    level = len(name) - len(name.lstrip("."))
    return _bootstrap_resolve(name[level:], package, level)


def _guard_importlib_import(name, globals=None, locals=None, fromlist=(), level=0):
    """importlib.__import__, as the user sees it."""
    _check_import(name, level, _getframe(1))
    return _hand_over(_real_import(name, globals, locals, fromlist, level))


def _denied(name, frame):
    _violate("builtin", name, "%s() is not available under the policy" % name, frame)
    return PermissionError("%s() is not allowed by the policy nsbox runs under" % name)


class _Denied:
    """Stands in for a denied builtin: calling it reports and refuses."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise _denied(self.name, _getframe(1))

    def __repr__(self):
        return "<built-in function %s (denied by the policy)>" % self.name


def _underscore_refused(name, frame):
    _violate("attribute", name,
             "attribute %r starts with an underscore: not allowed under "
             "strict_attrs" % name, frame)
    return AttributeError("attribute %r is not available under the policy nsbox "
                          "runs under" % name)


def _attrgetter(attr, *attrs):
    for a in (attr,) + attrs:
        if isinstance(a, str) and any(p.startswith("_") for p in a.split(".")):
            raise _underscore_refused(a, _getframe(1))
    return _real_attrgetter(attr, *attrs)


def _methodcaller(name, /, *args, **kwargs):
    if isinstance(name, str) and name.startswith("_"):
        raise _underscore_refused(name, _getframe(1))
    return _real_methodcaller(name, *args, **kwargs)


def _get_field(self, field_name, args, kwargs):
    _, rest = _field_split(field_name)
    for is_attr, key in rest:
        if is_attr and key.startswith("_"):
            raise _underscore_refused(key, _getframe(1))
    return _State.base_get_field(self, field_name, args, kwargs)


def _formatter(string):
    """string.Formatter without a route back to the real class (mro() would
    give it): a copy of its namespace whose get_field refuses "{0._x}"
    fields. Built when the program first asks (string imports re)."""
    real = string.Formatter
    _State.base_get_field = real.get_field
    return type("Formatter", (), dict(
        {k: v for k, v in vars(real).items() if k not in ("__dict__", "__weakref__")},
        get_field=_get_field, __module__="string"))


_FORMATTER = object()  # subst's placeholder for the copy _formatter builds


class _ModuleView(_ModuleType):
    """What user code gets for a module under strict_attrs (and for importlib
    whenever imports are checked): attributes that are modules are handed
    over only if allowed, as views again; underscore names are refused; the
    view is read-only. Guarded functions replace a few gadgets."""

    def __getattribute__(self, name):
        return _view_attr(self, name)

    def __setattr__(self, name, value):
        _view_set(self, name, value, False)

    def __delattr__(self, name):
        _view_set(self, name, None, True)

    def __repr__(self):
        return repr(_State.viewed.get(id(self)))


# type(json) shows as the plain module type it stands in for.
_ModuleView.__name__ = _ModuleView.__qualname__ = "module"
_ModuleView.__module__ = "builtins"


def _hand_over(mod):
    if not isinstance(mod, _ModuleType) or isinstance(mod, _ModuleView):
        return mod
    if not _State.cfg.strict and not (
            _State.subst and mod.__name__ == "importlib"):
        return mod
    v = _State.views.get(id(mod))
    if v is None:
        if mod.__name__ == "importlib" and _State.import_module is None:
            _State.import_module = mod.import_module
        v = _ModuleView(mod.__name__)
        _State.views[id(mod)] = v  # both maps keep both alive: ids stay valid
        _State.viewed[id(v)] = mod
    return v


def _module_allowed(value, parent, attr):
    allow = _State.cfg.allow
    if allow is None or _top(getattr(value, "__name__", "") or "") in allow:
        return True
    # os.path is posixpath: a submodule as registered under its parent
    return _modules.get("%s.%s" % (parent.__name__, attr)) is value


def _view_attr(view, name):
    mod = _State.viewed.get(id(view))
    if mod is None:  # a "view" the user built by calling type(view)
        raise AttributeError(name)
    sub = _State.subst.get((mod.__name__, name))
    if sub is _FORMATTER:
        sub = _State.subst[(mod.__name__, name)] = _formatter(mod)
    if sub is not None:
        return sub
    if not _State.cfg.strict:
        return getattr(mod, name)
    if name == "__dict__":  # dir(), star import without __all__
        return {k: _hand_over(v) for k, v in vars(mod).items()
                if (not k.startswith("_") or k in VIEW_DUNDERS)
                and (not isinstance(v, _ModuleType) or _module_allowed(v, mod, k))}
    if name.startswith("_") and name not in VIEW_DUNDERS:
        if not _is_dunder(name) or name in ESCAPE_ATTRS:
            raise _underscore_refused(name, _getframe(2))
        raise AttributeError(name)  # __class__ for isinstance() and the like
    try:
        value = getattr(mod, name)
    except AttributeError:
        value = _modules.get("%s.%s" % (mod.__name__, name))
        if value is None:
            raise
    if isinstance(value, _ModuleType) and not _module_allowed(value, mod, name):
        top = _top(value.__name__)
        _violate("import", top, "module %r reached as %s.%s is not allowed by the "
                 "policy (allowed: %s)" % (value.__name__, mod.__name__, name,
                                          _allowed_text(_State.cfg)), _getframe(2))
        raise AttributeError("module %r (%s.%s) is not allowed by the policy nsbox "
                             "runs under" % (value.__name__, mod.__name__, name))
    return _hand_over(value)


def _view_set(view, name, value, delete):
    mod = _State.viewed.get(id(view))
    if mod is None:
        raise AttributeError(name)
    if _State.cfg.strict:
        _violate("attribute", "%s.%s" % (mod.__name__, name),
                 "modules are read-only under strict_attrs", _getframe(2))
        raise AttributeError("module %r is read-only under the policy nsbox runs "
                             "under" % mod.__name__)
    if delete:
        delattr(mod, name)
    else:
        setattr(mod, name, value)


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


def _report_refused(frame):
    _violate("event", "open", "the runner's report channel is private", frame)
    return PermissionError(13, "the report channel is private to nsbox")


def _hook(event, args):
    """The audit hook (PEP 578). Installed before user code runs; Python code
    cannot remove it. It sees every event of every thread."""
    if not _State.running or event not in _State.watch:
        return
    if event in _PLAIN and _plain(event, args):
        return
    tid = _get_ident()
    if tid in _State.busy:
        return  # the hook's own work (ast.parse) raises events too
    _State.busy.add(tid)
    try:
        try:
            frame = _getframe(1)
        except ValueError:  # raised by C code with no Python frame (a new thread)
            frame = None
        cfg = _State.cfg
        if event in cfg.deny_events:
            _violate("event", event, "audit event %r is denied by the policy" % event,
                     frame)
            raise PermissionError("%s is not allowed by the policy nsbox runs under"
                                  % event)
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
            if not _is_machinery(frame) and not _is_ast_parse(frame.f_code):
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
    the events a library import raises (4,000 for pandas: reading its
    files, loading allowed modules). Anything it is not sure of gets the
    full treatment below."""
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
    of source that makes no code. The runner does not import ast (8 ms):
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
    asks it for them (tracebacks, warnings, inspect), but linecache costs
    5 ms to import (tokenize, re). So when something first imports it, the
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
    lc = _modules.get("linecache")
    if lc is None or _State.planted:
        return
    lines = _State.lines
    lc.cache[_State.cfg.filename] = (
        sum(len(l) + 1 for l in lines), None, [l + "\n" for l in lines],
        _State.cfg.filename)
    _State.planted = True


def _frame_refused(name, frame):
    _violate("attribute", name, "attribute %r hands out frames or code: not allowed "
             "under strict_attrs" % name, frame)
    return AttributeError("attribute %r is not available under the policy nsbox "
                          "runs under" % name)


# ---------------------------------------------------------------- tracebacks

def _strip(exc, seen):
    """Unlink the runner's frames from exc's traceback and its chain."""
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        kept, tb = [], exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_globals is not _RG:
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
        hook(type(exc), exc, exc.__traceback__)
    sys.stderr.flush()


# ---------------------------------------------------------------- phases

def _static(cfg, report, src):
    """Parse, compile and check; return the code object or exit."""
    try:
        if b"\0" in src:
            line = src.count(b"\n", 0, src.index(b"\0")) + 1
            raise SyntaxError("source code cannot contain null bytes",
                              (cfg.filename, line, 1, None))
        tree = compile(src, cfg.filename, "exec", _ast.PyCF_ONLY_AST)
        code = compile(src, cfg.filename, "exec", dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError) as e:
        if not isinstance(e, SyntaxError):
            e = SyntaxError("the program is too deeply nested to compile",
                            (cfg.filename, 0, 0, None))
        line, col = e.lineno or 0, max((e.offset or 1) - 1, 0)
        report.line((("static", "syntax_error"), ("line", line), ("col", col),
                     ("detail", "%s: %s" % (type(e).__name__, e.msg))))
        e.__traceback__ = None
        _real_import("traceback").print_exception(type(e), e, None)
        sys.exit(EXIT_SYNTAX)
    # The tokenizer's lines: \n, \r\n and \r end a line, nothing else does.
    lines = _decode(src).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    found = []
    _check(tree, cfg, found)
    found = sorted({(l, c, k, n, d) for k, n, l, c, d in found})
    for line, col, kind, name, detail in found[:MAX_LINES]:
        report.violation(kind, name, line, _char_col(lines, line, col), detail)
    if not found:
        report.line((("static", "ok"),))
        return code, lines
    report.line((("static", "violations"), ("count", len(found))))
    w = sys.stderr.write
    w("nsbox: %s breaks the policy (%d violation%s); %s:\n" % (
        cfg.filename, len(found), "" if len(found) == 1 else "s",
        "nothing was run" if cfg.mode == "run" else "checked only"))
    for line, col, kind, name, detail in found[:20]:
        w("  line %d, col %d: %s\n" % (line, _char_col(lines, line, col), detail))
    if len(found) > 20:
        w("  ... and %d more\n" % (len(found) - 20))
    sys.stderr.flush()
    sys.exit(EXIT_POLICY)


def _user_builtins(cfg):
    ub = dict(builtins.__dict__)
    if cfg.allow is not None or cfg.strict or "__import__" in cfg.deny_builtins:
        ub["__import__"] = _guard_import
    for name in cfg.deny_builtins - {"open", "__import__"}:
        ub[name] = _Denied(name)
    return ub


def _run(cfg, report, code, lines):
    _State.cfg, _State.report, _State.lines = cfg, report, lines
    _State.user_files = {cfg.filename}
    _State.code_dirs = tuple(sorted(set(cfg.writable) | {
        _realpath(d) for d in ("/workspace", "/tmp", "/dev/shm")}))
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
    report = _Report(cfg.fd)
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
