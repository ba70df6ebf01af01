"""Restricted mode (python.mode "restricted"): the program compiled by
RestrictedPython, its attribute reads and writes, item access, iteration,
unpacking, augmented assignment and print rewritten into calls of the
guards below, which this module supplies with the program's builtins.

The static check (static.py) still reports imports and denied builtins;
RestrictedPython's compiler, with nsbox's rules (_policy_class), reports
what it refuses as violations of the same report, all at once, and the
audit hook (guard.py) still watches the run. RestrictedPython is the
runner's own library: imported from the root's private directory
(config restricted_lib, Go's pyrunner.LibDir), before the hook, and
dropped from sys.modules again, so the program cannot import it.

What the guards hold: no attribute starting with "_" but READ_DUNDERS;
no frame, code object or traceback, by name or by type; no mro(); no
metaclass but the stand-in for type (_Type: one argument only); modules
only as views (views.py) the allowlist allows; str.format and format_map,
string.Formatter, operator.attrgetter and methodcaller,
functools.update_wrapper and wraps, and typing.get_origin only through
the same rules; writes refused to modules and to classes the program did
not create.
tests/test_restricted.py and Go's restricted_test.go are the checks.
"""

import _operator
import _string
import builtins
import sys

from .bound import _as_program, _field_split, _getframe, _ModuleType, _modules, _real_import
from .config import _fail
from .guard import _frame_refused, _State, _underscore_refused, _violate
from .static import _Compilers
from .views import _Denied, _hand_over, _module_allowed

# Dunder attributes the program may read: names, docs, the class (through
# the same filter as type(x)), and the methods ordinary code calls
# explicitly (super().__init__(...), a __repr__ delegating to a parent's).
READ_DUNDERS = frozenset((
    "__init__", "__name__", "__qualname__", "__doc__", "__module__", "__class__",
    "__str__", "__repr__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__len__", "__iter__", "__next__", "__contains__",
    "__getitem__", "__setitem__", "__delitem__", "__enter__", "__exit__",
    "__call__", "__bool__", "__post_init__", "__format__", "__cause__",
    "__context__"))
# Dunder methods a class body of the program may define: the protocols the
# interpreter calls with values the program already holds. Not among them:
# __getattr__, __getattribute__, __setattr__, __delattr__, descriptors
# (__get__, __set__, __delete__, __set_name__), __init_subclass__,
# __class_getitem__, __new__, __del__, pickling and copying hooks,
# __instancecheck__ and __subclasscheck__, __mro_entries__: each is called
# by the interpreter or by library code with names or objects the program
# did not hand over.
DEF_DUNDERS = READ_DUNDERS - {"__name__", "__qualname__", "__doc__", "__module__",
                              "__class__", "__cause__", "__context__"} | frozenset((
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__",
    "__pow__", "__matmul__", "__and__", "__or__", "__xor__", "__lshift__",
    "__rshift__", "__radd__", "__rsub__", "__rmul__", "__rtruediv__",
    "__rfloordiv__", "__rmod__", "__rpow__", "__rand__", "__ror__", "__rxor__",
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__int__", "__float__",
    "__index__", "__round__", "__reversed__", "__missing__", "__divmod__"))
# Names the program may read that start with "_": its module's name.
READ_NAMES = frozenset(("__name__",))
# Attributes refused whatever the object: they hand out frames, code, the
# class hierarchy, or (format) a way to read attributes by a string.
REFUSED_ATTRS = frozenset((
    "mro", "tb_frame", "tb_next", "f_back", "f_builtins", "f_code", "f_generator",
    "f_globals", "f_locals", "f_trace", "co_code", "gi_frame", "gi_code",
    "gi_yieldfrom", "cr_await", "cr_frame", "cr_code", "cr_origin", "ag_await",
    "ag_frame", "ag_code"))
FORMAT_ATTRS = frozenset(("format", "format_map"))
# The real callables the guards use, bound now (guard.py, invariant 1).
_real_getattr = getattr
_real_setattr = setattr
_real_delattr = delattr
_real_dir = dir
_real_vars = vars
_real_print = print
_real_type = type
_real_iter = iter
_real_build_class = builtins.__build_class__
_str_format = str.format
_str_format_map = str.format_map
_formatter_parser = _string.formatter_parser
_FrameType = type(sys._getframe())
_CodeType = type(_fail.__code__)
_BuiltinMethod = type([].append)


def _traceback_type():
    try:
        raise TypeError
    except TypeError as e:
        return type(e.__traceback__)


_HIDDEN_TYPES = frozenset((_FrameType, _CodeType, _traceback_type()))
# Values handed over without a look: nothing of these leads anywhere.
_PLAIN_TYPES = frozenset((int, float, str, bool, bytes, complex, list, tuple, dict, set,
                    frozenset, type(None), range, slice))
_INPLACE = {"+=": _operator.iadd, "-=": _operator.isub, "*=": _operator.imul,
            "/=": _operator.itruediv, "//=": _operator.ifloordiv, "%=": _operator.imod,
            "**=": _operator.ipow, "<<=": _operator.ilshift, ">>=": _operator.irshift,
            "|=": _operator.ior, "^=": _operator.ixor, "&=": _operator.iand,
            "@=": _operator.imatmul}


class _RP:
    """RestrictedPython's transformer with nsbox's rules (_policy_class),
    once loaded (_load_restricted); the program's classes (id -> class),
    the only classes _write_ lets it change."""
    policy = None
    classes = {}
    formatter = None


def _load_restricted(cfg):
    """Import RestrictedPython's transformer from the root's private copy,
    as the runner's own (before the hook), without the package's __init__
    (which would load its other modules); then drop it from sys.modules.
    A root without the copy was built by another nsbox: fail closed."""
    if _RP.policy is not None:
        return
    where = cfg.restricted_lib + "/RestrictedPython"
    try:
        _real_import("posix").stat(where + "/transformer.py")
    except OSError as e:
        _fail("python.mode \"restricted\" needs RestrictedPython, which this root lacks "
              "(%s: %s): the root was built by another nsbox version; rebuild it "
              "(nsbox rootfs build, or for a built-in root remove it, or make it)"
              % (where, e.strerror))
    pkg = _ModuleType("RestrictedPython")
    pkg.__path__ = [where]
    pkg.__package__ = "RestrictedPython"
    before = set(_modules)
    _modules["RestrictedPython"] = pkg
    try:
        tr = _real_import("RestrictedPython.transformer", fromlist=("IOPERATOR_TO_STR",))
    except BaseException as e:
        _fail("python.mode \"restricted\": import RestrictedPython from %s: %s: %s"
              % (where, type(e).__name__, e))
    finally:
        for name in [m for m in _modules if m not in before and m.startswith("RestrictedPython")]:
            del _modules[name]
    _RP.policy = _policy_class(tr, _real_import("ast"))
    _RP.formatter = _formatter_class(_real_import("string"))


def _policy_class(tr, ast):
    """RestrictingNodeTransformer with nsbox's rules: errors keep their
    node's position and a plain reason; the dunder methods of DEF_DUNDERS
    may be defined and those of READ_DUNDERS read; classes keep their own
    metaclass (RestrictedPython's __metaclass__ hook is not used) and may
    not name one; nonlocal is allowed; augmented assignment to attributes
    and items is rewritten through the guards; match is refused."""
    base = tr.RestrictingNodeTransformer
    copy_locations = tr.copy_locations

    class _Policy(base):
        def error(self, node, info):
            # RestrictedPython's own refusals ("*" imports, lazy imports);
            # exec and eval are the static check's and the builtins' to
            # refuse (RESTRICTED_DENY).
            if info.startswith(("Exec calls", "Eval calls")):
                return
            self.errors.append((getattr(node, "lineno", 0) or 0,
                                getattr(node, "col_offset", 0) or 0, "construct", "",
                                "%s (restricted mode)" % info.rstrip(".")))

        def refuse(self, node, name, info):
            self.errors.append((getattr(node, "lineno", 0) or 0,
                                getattr(node, "col_offset", 0) or 0, "construct", name, info))

        def not_allowed(self, node):
            name = type(node).__name__
            self.refuse(node, name, "%s is not allowed in restricted mode: RestrictedPython "
                        "has no guard for it" % _CONSTRUCTS.get(name, name))

        def check_name(self, node, name, allow_magic_methods=False):
            if name is None:
                return
            if name.startswith("_") and name != "_" and not (
                    allow_magic_methods and name in DEF_DUNDERS and node.col_offset != 0):
                what = ("method %r: only the common dunder methods may be defined "
                        "in restricted mode" % name) if allow_magic_methods and _dunder(name) else (
                    "name %r starts with an underscore: not allowed in restricted mode" % name)
                self.errors.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                                    "attribute", name, what))
            elif name in ("print", "printed", "builtins", "breakpoint"):
                self.errors.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                                    "attribute", name,
                                    "name %r is reserved in restricted mode" % name))

        def visit_Name(self, node):
            if type(node.ctx) is ast.Load:
                if node.id in READ_NAMES:
                    return node
                if node.id == "printed":
                    self.refuse(node, "printed", "'printed' (RestrictedPython's collected "
                                "output) is not available: print writes to stdout")
                    return node
            return base.visit_Name(self, node)

        def visit_Attribute(self, node):
            name = node.attr
            load = type(node.ctx) is ast.Load
            if name.startswith("_") and not (load and name in READ_DUNDERS):
                self.errors.append((node.end_lineno, node.end_col_offset - len(
                    name.encode("utf-8")), "attribute", name,
                    "attribute %r starts with an underscore: not allowed in "
                    "restricted mode" % name))
            elif name in REFUSED_ATTRS:
                self.errors.append((node.end_lineno, node.end_col_offset - len(
                    name.encode("utf-8")), "attribute", name,
                    "attribute %r hands out frames, code or the class hierarchy: not "
                    "allowed in restricted mode" % name))
            node = self.node_contents_visit(node)
            if load:
                new = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                               args=[node.value, ast.Constant(name)], keywords=[])
                copy_locations(new, node)
                return new
            new = ast.Call(func=ast.Name("_write_", ast.Load()), args=[node.value], keywords=[])
            copy_locations(new, node.value)
            node.value = new
            return node

        def visit_ClassDef(self, node):
            self.check_name(node, node.name)
            for k in node.keywords:
                if k.arg == "metaclass":
                    self.refuse(k.value, "metaclass", "a metaclass= keyword is not allowed "
                                "in restricted mode: a metaclass's hooks see objects the "
                                "guards never hand over")
            return self.node_contents_visit(node)

        def visit_AnnAssign(self, node):
            # x: int = v, self.x: int = v: the target, annotation and value
            # are rewritten like any other (dataclasses need annotations).
            return self.node_contents_visit(node)

        def visit_Nonlocal(self, node):
            for name in node.names:
                self.check_name(node, name)
            return node

        def visit_Match(self, node):
            self.refuse(node, "match", "the match statement is not allowed in restricted "
                        "mode: class patterns read attributes (__match_args__) no guard sees")
            return node

        def visit_AugAssign(self, node):
            """x.a += v and x[k] += v as two guarded steps on temporaries:
            _t = x; _write_(_t).a = _inplacevar_("+=", _getattr_(_t, "a"), v)."""
            t = node.target
            if type(t) is ast.Name:
                return base.visit_AugAssign(self, node)
            node = self.node_contents_visit(node)
            t = node.target  # its value and slice are visited (rewritten) now
            if type(t) is ast.Subscript and _has_slice(t.slice, ast):
                self.refuse(node, "slice", "augmented assignment to a slice is not allowed "
                            "in restricted mode: write x[a:b] = x[a:b] + v")
                return node
            obj = self.gen_tmp_name()
            pre = [ast.Assign(targets=[ast.Name(obj, ast.Store())], value=t.value)]
            if type(t) is ast.Attribute:
                if t.attr.startswith("_"):
                    return node  # refused by visit_Attribute already
                read = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                                args=[ast.Name(obj, ast.Load()), ast.Constant(t.attr)], keywords=[])
                target = ast.Attribute(value=ast.Call(
                    func=ast.Name("_write_", ast.Load()), args=[ast.Name(obj, ast.Load())],
                    keywords=[]), attr=t.attr, ctx=ast.Store())
            else:
                key = self.gen_tmp_name()
                pre.append(ast.Assign(targets=[ast.Name(key, ast.Store())], value=t.slice))
                read = ast.Call(func=ast.Name("_getitem_", ast.Load()),
                                args=[ast.Name(obj, ast.Load()), ast.Name(key, ast.Load())],
                                keywords=[])
                target = ast.Subscript(value=ast.Call(
                    func=ast.Name("_write_", ast.Load()), args=[ast.Name(obj, ast.Load())],
                    keywords=[]), slice=ast.Name(key, ast.Load()), ctx=ast.Store())
            op = tr.IOPERATOR_TO_STR[type(node.op)]
            pre.append(ast.Assign(targets=[target], value=ast.Call(
                func=ast.Name("_inplacevar_", ast.Load()),
                args=[ast.Constant(op), read, node.value], keywords=[])))
            for n in pre:
                copy_locations(n, node)
                ast.fix_missing_locations(n)
            return pre

    def _has_slice(n, ast):
        return type(n) is ast.Slice or type(n) is ast.Tuple and any(
            type(e) is ast.Slice for e in n.elts)

    return _Policy


def _dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


# What the refused nodes are, in a reader's words.
_CONSTRUCTS = {
    "AsyncFunctionDef": "async def", "Await": "await", "AsyncFor": "async for",
    "AsyncWith": "async with", "TryStar": "except*", "Match": "match",
}


def _compile_restricted(cfg, tree, filename):
    """Rewrite tree (the program's or a cell's module AST, checked by
    static.py) in place with RestrictedPython and nsbox's rules. Returns
    the violations as (kind, name, line, bytecol, detail), every one at
    once; the caller compiles the tree when there are none. Sessions
    compile each cell through here too (static._checked)."""
    _load_restricted(cfg)
    errors = []
    _RP.policy(errors, [], {}).visit(tree)
    return [(kind, name or _name_in(detail), line, col, detail)
            for line, col, kind, name, detail in errors]


def _name_in(detail):
    """The quoted name in one of RestrictedPython's own messages."""
    parts = detail.split('"')
    return parts[1] if len(parts) > 2 else "restricted"


_Compilers.restricted = _compile_restricted


# The guards: what the rewritten program calls. Each refusal is reported
# (a runtime violation at the program's line) and raised.

def _refuse_name(name, frame):
    if name.startswith("_"):
        return _underscore_refused(name, frame)
    return _frame_refused(name, frame)


def _name_ok(name):
    return not (name.startswith("_") and name not in READ_DUNDERS) and name not in REFUSED_ATTRS


def _handed(value, name, frame):
    """What the program may hold of value, read as attribute or item name:
    modules as views the allowlist allows; no frame or code object; the
    stand-in for type instead of any metaclass."""
    t = _real_type(value)
    if t in _PLAIN_TYPES:
        return value
    if t in _HIDDEN_TYPES:
        raise _frame_refused(name, frame)
    if isinstance(value, _ModuleType):
        if _State.viewed.get(_real_id(value)) is not None:
            return value
        if not _module_allowed(value, value, name):
            top = value.__name__.partition(".")[0]
            _violate("import", top, "module %r reached as attribute %r is not allowed by "
                     "the policy" % (value.__name__, name), frame)
            raise AttributeError("module %r is not allowed by the policy nsbox runs under"
                                 % value.__name__)
        return _hand_over(value)
    if isinstance(value, type) and issubclass(value, type):
        if value is type or value is _TypeMeta:
            return _Type
        _violate("attribute", name, "metaclass %r is not handed out in restricted mode"
                 % value.__name__, frame)
        raise AttributeError("metaclass %r is not available under the policy nsbox runs "
                             "under" % value.__name__)
    if name in FORMAT_ATTRS:
        return _format_guard(value)
    return value


_real_id = id


def _format_guard(value):
    """str.format and str.format_map, bound or not, as a call that checks
    the format string's fields first ("{0.__class__}" reads attributes)."""
    if value is _str_format or value is _str_format_map:
        def unbound(s, *args, **kwargs):
            _check_format(s, _getframe(1))
            return value(s, *args, **kwargs)
        return unbound
    if _real_type(value) is _BuiltinMethod and isinstance(
            _real_getattr(value, "__self__", None), str) and value.__name__ in FORMAT_ATTRS:
        s = value.__self__

        def bound(*args, **kwargs):
            _check_format(s, _getframe(1))
            return value(*args, **kwargs)
        return bound
    return value


def _check_format(fmt, frame):
    """Refuse a format string whose fields read an attribute the guards
    would refuse, nested format specs included."""
    if not isinstance(fmt, str):
        return
    for _, field, spec, _ in _formatter_parser(fmt):
        if field is not None:
            _, rest = _field_split(field)
            for is_attr, key in rest:
                if is_attr and not _name_ok(key):
                    raise _refuse_name(key, frame)
        if spec:
            _check_format(spec, frame)


_MISSING = object()


def _r_getattr(obj, name, default=_MISSING):
    """_getattr_ and getattr()."""
    if _real_type(name) is not str:
        raise TypeError("attribute name must be string, not %r" % _real_type(name).__name__)
    if not _name_ok(name):
        raise _refuse_name(name, _getframe(1))
    if name == "__class__":
        return _class_of(obj)
    if isinstance(obj, _ModuleType) and _State.viewed.get(_real_id(obj)) is None:
        obj = _handed(obj, name, _getframe(1))
    try:
        value = _real_getattr(obj, name)
    except AttributeError:
        if default is _MISSING:
            raise
        return default
    if _real_type(value) in _PLAIN_TYPES and name not in FORMAT_ATTRS:
        return value
    return _handed(value, name, _getframe(1))


def _r_hasattr(obj, name):
    try:
        _r_getattr(obj, name)
    except AttributeError:
        return False
    return True


def _r_getitem(obj, key):
    value = obj[key]
    if _real_type(value) in _PLAIN_TYPES:
        return value
    return _handed(value, "[]", _getframe(1))


def _r_write(obj):
    """_write_: the object whose attribute or item the program sets or
    deletes. Refused: classes the program did not create; a module is
    handed over as its view, which refuses the write."""
    if isinstance(obj, _ModuleType):
        return _hand_over(obj)  # a view: read-only, it names the attribute (views.py)
    if isinstance(obj, type) and _RP.classes.get(_real_id(obj)) is not obj:
        name = obj.__name__
        _violate("attribute", name, "class %r is not the program's: its attributes are "
                 "read-only in restricted mode" % name, _getframe(1))
        raise AttributeError("class %r is read-only under the policy nsbox runs under" % name)
    return obj


def _r_setattr(obj, name, value):
    if _real_type(name) is not str:
        raise TypeError("attribute name must be string")
    if name.startswith("_"):
        raise _underscore_refused(name, _getframe(1))
    _real_setattr(_r_write(obj), name, value)


def _r_delattr(obj, name):
    if _real_type(name) is not str:
        raise TypeError("attribute name must be string")
    if name.startswith("_"):
        raise _underscore_refused(name, _getframe(1))
    _real_delattr(_r_write(obj), name)


def _r_dir(*args):
    """dir(obj): the names the guards let the program read. dir() lists
    the caller's names."""
    if not args:
        names = _getframe(1).f_locals
    elif len(args) == 1:
        names = _real_dir(args[0])
    else:
        raise TypeError("dir expected at most 1 argument, got %d" % len(args))
    return sorted(n for n in names if _name_ok(n))


def _r_vars(*args):
    """vars(obj): a copy of its namespace, with only what _getattr_ would
    hand over. vars() (the caller's locals) is refused, as locals()."""
    if len(args) != 1:
        _violate("builtin", "vars", "vars() without an argument is not available in "
                 "restricted mode", _getframe(1))
        raise PermissionError("vars() is not allowed by the policy nsbox runs under")
    obj = args[0]
    if isinstance(obj, _ModuleType):
        obj = _hand_over(obj)
    ns = _real_vars(obj)
    frame = _getframe(1)
    return {k: _handed(v, k, frame) for k, v in ns.items()
            if _real_type(k) is str and _name_ok(k)}


def _r_iter_unpack(it, spec, getiter):
    for ob in getiter(it):
        yield _r_unpack(ob, spec, getiter)


def _r_unpack(it, spec, getiter):
    ret = list(getiter(it))
    if len(ret) < spec["min_len"]:
        return ret
    for idx, child in spec["childs"]:
        ret[idx] = _r_unpack(ret[idx], child, getiter)
    return ret


def _r_inplacevar(op, x, y):
    f = _INPLACE.get(op)
    if f is None:
        raise SyntaxError("operator %r" % op)
    return f(x, y)


def _r_apply(f, *args, **kwargs):
    return f(*args, **kwargs)


class _PrintOut:
    """_print_: print() as the program wrote it, to its sys.stdout (or the
    file= it names), called as the program (bound.py, _as_program)."""

    def __init__(self, getattr_=None):
        pass

    def _call_print(self, *objects, **kwargs):
        f = kwargs.get("file")
        if f is not None:
            _r_getattr(f, "write")
        _as_program(_real_print, *objects, **kwargs)


def _class_of(obj):
    """type(obj) and obj.__class__: the class, or the stand-in for type
    when it is a metaclass (the program never holds a real metaclass, so
    never a three-argument type())."""
    t = _real_type(obj)
    if issubclass(t, type):
        return _Type
    return t


class _TypeMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub):
        return sub is _Type or issubclass(sub, type)

    def __repr__(cls):
        return "<class 'type'>"


class _Type(metaclass=_TypeMeta):
    """type, as the program has it: type(obj) only; isinstance(x, type)
    and issubclass(C, type) as usual."""

    def __new__(cls, *args, **kwargs):
        if len(args) != 1 or kwargs:
            frame = _getframe(1)
            _violate("builtin", "type", "type() with %d arguments creates a class from a "
                     "namespace dict: not available in restricted mode" % len(args), frame)
            raise PermissionError("type() with more than one argument is not allowed by "
                                  "the policy nsbox runs under")
        return _class_of(args[0])


_Type.__name__ = _Type.__qualname__ = "type"
_Type.__module__ = "builtins"


def _r_build_class(func, name, *bases, **kwargs):
    """__build_class__: a class statement of the program's; the class is
    recorded as the program's own (writable, _r_write)."""
    if "metaclass" in kwargs:
        _violate("construct", "metaclass", "a metaclass is not allowed in restricted mode",
                 _getframe(1))
        raise PermissionError("metaclasses are not allowed by the policy nsbox runs under")
    cls = _real_build_class(func, name, *bases, **kwargs)
    _RP.classes[_real_id(cls)] = cls
    return cls


class _AttrGetter:
    """operator.attrgetter as the program has it: every name checked when
    it is made, every read through _getattr_."""

    def __init__(self, attr, *attrs):
        self.names = (attr,) + attrs
        for a in self.names:
            if not isinstance(a, str):
                raise TypeError("attribute name must be a string")
            for part in a.split("."):
                if not _name_ok(part):
                    raise _refuse_name(part, _getframe(1))

    def __call__(self, obj):
        got = []
        for a in self.names:
            v = obj
            for part in a.split("."):
                v = _r_getattr(v, part)
            got.append(v)
        return got[0] if len(got) == 1 else tuple(got)


class _MethodCaller:
    """operator.methodcaller as the program has it (_AttrGetter's rules)."""

    def __init__(self, name, /, *args, **kwargs):
        if not isinstance(name, str):
            raise TypeError("method name must be a string")
        if not _name_ok(name):
            raise _refuse_name(name, _getframe(1))
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, obj):
        return _r_getattr(obj, self.name)(*self.args, **self.kwargs)


_AttrGetter.__name__ = _AttrGetter.__qualname__ = "attrgetter"
_MethodCaller.__name__ = _MethodCaller.__qualname__ = "methodcaller"
_AttrGetter.__module__ = _MethodCaller.__module__ = "operator"


def _wrapper_names(assigned, updated):
    """functools.update_wrapper and wraps read and write the attributes
    they are given by name: only their defaults' names are allowed."""
    ft = _modules["functools"]
    for n in assigned:
        if n not in ft.WRAPPER_ASSIGNMENTS:
            raise _refuse_name(n if isinstance(n, str) else repr(n), _getframe(2))
    for n in updated:
        if n not in ft.WRAPPER_UPDATES:
            raise _refuse_name(n if isinstance(n, str) else repr(n), _getframe(2))
    return ft


def _r_update_wrapper(wrapper, wrapped, assigned=("__module__", "__name__", "__qualname__",
                                                  "__doc__", "__annotations__"),
                      updated=("__dict__",)):
    ft = _wrapper_names(tuple(assigned), tuple(updated))
    return ft.update_wrapper(wrapper, wrapped, tuple(assigned), tuple(updated))


def _r_wraps(wrapped, assigned=("__module__", "__name__", "__qualname__", "__doc__",
                                "__annotations__"), updated=("__dict__",)):
    ft = _wrapper_names(tuple(assigned), tuple(updated))
    return ft.wraps(wrapped, tuple(assigned), tuple(updated))


def _r_get_origin(tp):
    """typing.get_origin, which hands out a generic alias's origin: for
    typing.Type, the real type (a metaclass: _handed gives the stand-in)."""
    origin = _modules["typing"].get_origin(tp)
    if origin is None or _real_type(origin) in _PLAIN_TYPES:
        return origin
    return _handed(origin, "get_origin", _getframe(1))


def _formatter_class(string):
    """string.Formatter whose fields read attributes and items through the
    guards (a copy of its namespace: no route back to the real class)."""
    real = string.Formatter

    def get_field(self, field_name, args, kwargs):
        first, rest = _field_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            obj = _r_getattr(obj, key) if is_attr else _r_getitem(obj, key)
        return obj, first

    return _real_type("Formatter", (), dict(
        {k: v for k, v in _real_vars(real).items() if k not in ("__dict__", "__weakref__")},
        get_field=get_field, __module__="string"))


# Builtins restricted mode takes away whatever the policy says: each makes
# code or reaches frames and namespaces the guards never see.
RESTRICTED_DENY = frozenset(("eval", "exec", "compile", "globals", "locals",
                             "breakpoint", "help", "aiter", "anext"))


def _restricted_builtins(cfg, ub):
    """The program's builtins in restricted mode, from ub (views.py's
    _user_builtins: the guarded __import__ and the policy's denied
    builtins): the guards RestrictedPython's code calls, guarded getattr
    and its family, the stand-in for type, and RESTRICTED_DENY refused.
    Also the guarded gadgets the module views hand out (guard.py's
    _State.subst). Loads RestrictedPython first (before the hook)."""
    _load_restricted(cfg)
    b = dict(ub)
    for name in ("__loader__", "__spec__", "__package__"):
        b.pop(name, None)
    for name in RESTRICTED_DENY:
        if name in b:
            b[name] = _Denied(name)
    guarded = {"getattr": _r_getattr, "setattr": _r_setattr, "delattr": _r_delattr,
               "hasattr": _r_hasattr, "vars": _r_vars, "dir": _r_dir}
    for name, f in guarded.items():
        if name not in cfg.deny_builtins:
            b[name] = f
    b.update({
        "type": _Type, "__build_class__": _r_build_class,
        "_getattr_": _r_getattr, "_getitem_": _r_getitem, "_getiter_": _real_iter,
        "_iter_unpack_sequence_": _r_iter_unpack, "_unpack_sequence_": _r_unpack,
        "_write_": _r_write, "_inplacevar_": _r_inplacevar, "_apply_": _r_apply,
        "_print_": _PrintOut,
    })
    _State.subst.update({("operator", "attrgetter"): _AttrGetter,
                         ("operator", "methodcaller"): _MethodCaller,
                         ("functools", "update_wrapper"): _r_update_wrapper,
                         ("functools", "wraps"): _r_wraps,
                         ("typing", "get_origin"): _r_get_origin,
                         ("string", "Formatter"): _RP.formatter})
    return b
