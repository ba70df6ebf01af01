"""Names bound at start-up.

Start-up is paid by every sandboxed run, so the runner imports only
built-in and frozen modules: posix, not os; _ast, not ast; no json, re,
tokenize, linecache or traceback, which would cost more than the rest of
the runner together. What it needs only on a rare path it takes when that
path comes: tokenize for a coding cookie, traceback to print one,
linecache when something imports it, and, from the real modules once the
program has them, importlib.import_module and string.Formatter's
get_field (a program that swaps those first only changes what its own
checked call then runs).

Every callable the fence relies on while the program runs is bound here,
before any of the program runs, so that monkey-patching a module later
(posix.write, sys._getframe, builtins.__import__, operator.attrgetter)
changes nothing the runner calls. guard.py states this with the guard's
other invariants; tests/test_bundle.py checks that only built-in and
frozen modules are imported at start-up.
"""

import _ast
import _operator
import _string
import _thread
import builtins
import posix
import sys

_write = posix.write
_lstat = posix.lstat
_readlink = posix.readlink
_getcwd = posix.getcwd
_fspath = posix.fspath
_getframe = sys._getframe
_audit = sys.audit
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


class _Bound:
    def method(self):
        """Gives the type of a bound method (types.MethodType)."""


_MethodType = type(_Bound().method)
_STDLIB = getattr(sys, "_stdlib_dir", None) or "%s/%s/python%d.%d" % (
    sys.base_prefix, sys.platlibdir, sys.version_info[0], sys.version_info[1])

# The program's side of the runner: a frame whose globals are _PG runs as
# the program (its builtins are the program's). _arm puts there the one
# function _as_program calls through. guard.py, invariant 11.
_PG = {}


def _as_program(f, *args, **kwargs):
    """f(*args, **kwargs) called from a frame of the program's, not the
    runner's: the runner calling the program's objects (repr, _repr_html_,
    savefig, its sys.stdout) must not lend them its own frame (a builtin
    such as exec, called from C, runs in its caller's globals)."""
    call = _PG.get("call")
    return f(*args, **kwargs) if call is None else call(f, *args, **kwargs)


def _call_method(obj, name, *args):
    """obj.name(*args), the lookup and the call both as the program."""
    return _as_program(_as_program(getattr, obj, name), *args)
