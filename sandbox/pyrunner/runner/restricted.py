"""Restricted mode (python.mode "restricted"), its compiler: the program
compiled by RestrictedPython, its attribute reads and writes, item
access, iteration, unpacking, augmented assignment and print rewritten
into calls of the guards (restricted_guards.py).

The static check (static.py) still reports imports and denied builtins;
RestrictedPython's compiler, with nsbox's rules (_policy_class), reports
what it refuses as violations of the same report, all at once, and the
audit hook (guard.py) still watches the run. RestrictedPython is the
runner's own library: imported from the root's private directory
(config restricted_lib, Go's pyrunner.LibDir), before the hook, and
dropped from sys.modules again, so the program cannot import it.
Go's restricted_test.go and restricted_escape_test.go are the checks.
"""

from .bound import _ModuleType, _modules, _real_import
from .config import _fail
from .static import _Compilers

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
