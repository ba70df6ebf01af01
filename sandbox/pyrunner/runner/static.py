"""The static check: the whole program is parsed and compiled before any
of it runs, and every violation is collected at once (imports, denied
builtins, and under strict_attrs underscore attributes). The guard runs
the same check on code compiled at run time (_check with codegen).

tests/test_static.py tests it without a sandbox."""

import _ast
import _frozen_importlib
import _frozen_importlib_external
import sys

from .bound import _AST, _call_method, _real_import

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


def _static(cfg, report, src):
    """Modes run and check: _checked, then exit on violations or a syntax
    error. Returns the code (body and final expression: _checked) and the
    program's lines."""
    status, codes, lines = _checked(cfg, report, src, cfg.outputs and cfg.mode == "run", probe=True)
    if status == "violations":
        sys.exit(cfg.exit_policy)
    if status == "syntax_error":
        sys.exit(cfg.exit_syntax)
    return codes, lines


def _checked(cfg, report, src, split, probe=False):
    """Parse, compile and check src (bytes) as cfg.filename: write every
    violation and exactly one status line, and the human summary on
    stderr. probe (before the audit hook is armed only: a run's program,
    not a session's cell) asks the finders whether a refused import is
    installed at all (_import_detail). Returns (status, codes, lines): status is "ok", "violations" or
    "syntax_error"; codes, with "ok" only, is (body, final): with split and
    a bare expression as the last statement (the display rule), final is
    that expression compiled for eval and body the rest; otherwise final
    is None."""
    try:
        if b"\0" in src:
            line = src.count(b"\n", 0, src.index(b"\0")) + 1
            raise SyntaxError("source code cannot contain null bytes",
                              (cfg.filename, line, 1, None))
        tree = compile(src, cfg.filename, "exec", _ast.PyCF_ONLY_AST)
        # Compiled whole even when split: the compiler's own errors
        # ('return' outside function) are the program's, wherever they are.
        # In restricted mode the rewritten tree is compiled instead, below.
        code = None if cfg.restricted else compile(src, cfg.filename, "exec", dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError) as e:
        return _syntax_error(cfg, report, e)
    # The tokenizer's lines: \n, \r\n and \r end a line, nothing else does.
    lines = _decode(src).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    found = []
    _check(tree, cfg, found, probe=probe)
    if cfg.restricted:
        # RestrictedPython rewrites the tree in place and adds what it
        # refuses (restricted.py); the rewritten tree is what runs.
        found.extend(_Compilers.restricted(cfg, tree, cfg.filename))
        if not found:
            try:
                code = compile(tree, cfg.filename, "exec", dont_inherit=True)
            except (SyntaxError, RecursionError, MemoryError) as e:
                return _syntax_error(cfg, report, e)
    found = sorted({(l, c, k, n, d) for k, n, l, c, d in found})
    for line, col, kind, name, detail in found[:cfg.max_lines]:
        report.violation(kind, name, line, _char_col(lines, line, col), detail)
    if not found:
        report.line((("static", "ok"),))
        return "ok", _split(tree, code, cfg.filename) if split else (code, None), lines
    report.line((("static", "violations"), ("count", len(found))))

    def w(text):
        _call_method(sys.stderr, "write", text)
    w("nsbox: %s breaks the policy (%d violation%s); %s:\n" % (
        cfg.filename, len(found), "" if len(found) == 1 else "s",
        "checked only" if cfg.mode == "check" else "nothing was run"))
    for line, col, kind, name, detail in found[:20]:
        w("  line %d, col %d: %s\n" % (line, _char_col(lines, line, col), detail))
    if len(found) > 20:
        w("  ... and %d more\n" % (len(found) - 20))
    _call_method(sys.stderr, "flush")
    return "violations", None, None


def _syntax_error(cfg, report, e):
    """Report a program that does not compile: its status line and
    Python's own message on stderr."""
    if not isinstance(e, SyntaxError):
        e = SyntaxError("the program is too deeply nested to compile",
                        (cfg.filename, 0, 0, None))
    line, col = e.lineno or 0, max((e.offset or 1) - 1, 0)
    report.line((("static", "syntax_error"), ("line", line), ("col", col),
                 ("detail", "%s: %s" % (type(e).__name__, e.msg))))
    e.__traceback__ = None
    _real_import("traceback").print_exception(type(e), e, None)
    return "syntax_error", None, None


class _Compilers:
    """The restricted compiler (restricted.py), which comes later in the
    bundle: it sets restricted to its _compile_restricted."""
    restricted = None


def _split(tree, code, filename):
    """The display rule, as a notebook has it: a last statement that is a
    bare expression is evaluated for its value. Returns (body, final):
    the statements before it, and it compiled for eval; (code, None) when
    the last statement is anything else."""
    if not tree.body or type(tree.body[-1]) is not _ast.Expr:
        return code, None
    last = tree.body.pop()
    body = compile(tree, filename, "exec", dont_inherit=True)
    final = compile(_ast.Expression(last.value), filename, "eval", dont_inherit=True)
    return body, final


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


def _short(names, n):
    if len(names) <= n:
        return ", ".join(names)
    return "%s, ... (%d in all)" % (", ".join(names[:n]), len(names))


def _allowed_text(cfg, probe=False):
    """The allowlist in short form for a model choosing another module:
    the packages (the root's, outside the standard library) first, then
    the standard library's modules. With probe, only the packages this
    root installs: an allowed name the root lacks is no alternative."""
    names = cfg.allow_listed
    if not names:
        return "nothing"
    std = sys.stdlib_module_names
    pkgs = [m for m in names if m not in std and (not probe or _installed(m))]
    mods = [m for m in names if m in std]
    parts = []
    if pkgs:
        parts.append("packages " + _short(pkgs, 10))
    if mods:
        parts.append("from the standard library " + _short(mods, 8))
    return "; ".join(parts)


def _installed(name):
    """Whether top-level module name can be found in this interpreter's
    root: built in, frozen, or on sys.path. Only finders are asked (no
    module code runs); called before the audit hook is armed (the static
    check), since the finders list directories."""
    if name in sys.builtin_module_names:
        return True
    try:
        return (_frozen_importlib.FrozenImporter.find_spec(name) is not None
                or _frozen_importlib_external.PathFinder.find_spec(name) is not None)
    except (ImportError, OSError, ValueError):
        return False


def _import_detail(cfg, name, probe=False):
    """Why an import of top-level name is refused; with probe, also
    whether the root has it at all, so that a model knows whether to ask
    for it in the policy or use another module."""
    why = ""
    if probe:
        why = (": it is installed but not in allowlist.imports" if _installed(name)
               else ": no module %r is installed in this root" % name)
    return "import of %r is not allowed by the policy%s (allowed: %s)" % (
        name, why, _allowed_text(cfg, probe))


def _relative_detail(name):
    return ("relative import %r is not allowed: the program is not part of "
            "a package" % name)


def _check(tree, cfg, out, codegen=False, probe=False):
    """Append (kind, name, line, bytecol, detail) for every violation in tree.

    codegen: the tree is code a library compiles at run time (strict_attrs
    only); then what counts is imports, eval-like names it does not bind
    itself, and attributes that lead to internals, not the policy's lists."""
    allow = None if codegen else cfg.allow
    strict = cfg.strict
    # In restricted mode RestrictedPython's compiler checks names and
    # attributes (restricted.py), with the same rules and more.
    attrs = strict and (codegen or not cfg.restricted)
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
            add("import", _top(name), node, _import_detail(cfg, _top(name), probe))

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
            if attrs:
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
            if (attrs and isinstance(f, _ast.Name) and len(n.args) > 1
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
            elif attrs and n.id in HIDDEN_NAMES:
                add("attribute", n.id, n,
                    "name %r reaches the interpreter's internals: not allowed "
                    "under strict_attrs" % n.id)
        elif isinstance(n, _ast.Attribute) and attrs:
            # Point at the name after the dot, not at the whole expression.
            line, col = n.end_lineno, n.end_col_offset - len(n.attr.encode("utf-8"))
            if codegen and n.attr in ESCAPE_ATTRS:
                add("attribute", n.attr, n, "attribute %r leads to the "
                    "interpreter's internals" % n.attr, line, col)
            elif not codegen and n.attr.startswith("_"):
                attr(n.attr, n, "attribute", line, col)
        elif isinstance(n, _ast.MatchClass) and attrs and not codegen:
            for k in n.kwd_attrs:  # case C(__class__=x) reads an attribute
                if k.startswith("_"):
                    attr(k, n, "attribute")
        elif (isinstance(n, _ast.Constant) and strict and not codegen
              and isinstance(n.value, str) and _is_dunder(n.value)):
            # "__module__", "__annotations__" as keys of a class namespace
            add("attribute", n.value, n,
                "string %r names a special attribute: not allowed under "
                "strict_attrs" % n.value)


def _decode(src):
    try:
        # A coding cookie can only be in the first two lines; without one
        # the source is UTF-8 (and tokenize, slow to import, is not needed).
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
