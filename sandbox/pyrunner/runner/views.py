"""What the program is handed instead of the real thing: its __import__
(the import guard), stubs for denied builtins and for help() where pydoc
is refused, a _posixsubprocess stub where subprocess.Popen is denied,
module views under strict_attrs, and guarded gadgets (operator.attrgetter
and methodcaller, string.Formatter, importlib's import functions). Part
of the guard: the invariants at the top of guard.py hold here too.
"""

import builtins

from .bound import (_audit, _bootstrap_resolve, _field_split, _getframe, _MethodType,
                    _ModuleType, _modules, _real_attrgetter, _real_import,
                    _real_methodcaller)
from .guard import (IMPORT_NAME, _State, _check_import, _underscore_refused,
                    _violate)
from .static import ESCAPE_ATTRS, _allowed_text, _is_dunder, _top

# Dunders a module view serves to the interpreter itself (import-from
# fallback, star import, dir); the static check keeps user code off them.
VIEW_DUNDERS = frozenset((
    "__name__", "__doc__", "__all__", "__file__", "__path__", "__package__",
    "__version__"))


def _user_builtins(cfg):
    ub = dict(builtins.__dict__)
    if cfg.allow is not None or cfg.strict or "__import__" in cfg.deny_builtins:
        ub["__import__"] = _guard_import
    for name in cfg.deny_builtins - {"open", "__import__"}:
        ub[name] = _Denied(name)
    if "help" in ub and cfg.allow is not None and "pydoc" not in cfg.allow:
        ub["help"] = _help_refused
    return ub


def _help_refused(*args, **kwargs):
    """help() where the policy refuses pydoc, which help() runs (and which
    imports whatever name it is given)."""
    _violate("import", "pydoc", "help() runs pydoc, which the policy does not allow",
             _getframe(1))
    raise ImportError("help() needs pydoc, which the policy nsbox runs under does not "
                      "allow", name="pydoc")


def _stub_posixsubprocess(cfg):
    """Where the policy denies subprocess.Popen, the program's
    _posixsubprocess is a stub, registered before anything loads the
    extension (whose fork_exec starts a process without any audit event),
    and _core refuses to load the real one (guard.py, RAW_MODULES). The
    stub's fork_exec raises the subprocess.Popen event, which the hook
    refuses and reports; subprocess itself imports as usual. A preload
    that loaded the extension already leaves it in place (doc.go, Limits)."""
    if "subprocess.Popen" not in cfg.deny_events or "_posixsubprocess" in _modules:
        return
    stub = _ModuleType("_posixsubprocess", "nsbox: fork_exec raises the audit event "
                       "subprocess.Popen, which the policy denies")
    stub.fork_exec = _MethodType(_audit, "subprocess.Popen")
    _modules["_posixsubprocess"] = stub


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
