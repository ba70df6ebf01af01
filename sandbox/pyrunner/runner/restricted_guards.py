"""Restricted mode's guards and builtins: what the program RestrictedPython
compiled (restricted.py) calls for every attribute read and write, item
access, iteration, unpacking, augmented assignment and print, and the
builtins it runs with.

What the guards hold: no attribute starting with "_" but READ_DUNDERS;
no frame, code object or traceback, by name or by type; no mro(); no
metaclass but the stand-in for type (_Type: one argument only); modules
only as views (views.py) the allowlist allows; str.format and format_map,
string.Formatter, operator.attrgetter and methodcaller,
functools.update_wrapper and wraps, and typing.get_origin only through
the same rules; writes refused to modules and to classes the program did
not create.
"""

import _operator
import _string
import builtins
import sys

from .bound import _as_program, _field_split, _getframe, _ModuleType, _modules, _real_import
from .config import _fail
from .guard import _frame_refused, _State, _underscore_refused, _violate
from .restricted import FORMAT_ATTRS, READ_DUNDERS, REFUSED_ATTRS, _RP, _load_restricted
from .views import _Denied, _hand_over, _module_allowed

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
    if _RP.formatter is None:
        _RP.formatter = _formatter_class(_real_import("string"))
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
