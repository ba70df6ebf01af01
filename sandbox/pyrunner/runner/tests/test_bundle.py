"""The package and the shipped bundle (../runner.py) mean the same, and
start-up stays cheap. The Go bundler checks the import lines and that the
bundle is current; this checks what needs a Python parser."""

import _imp
import ast
import os
import subprocess
import sys
import unittest

import runner

PACKAGE = os.path.dirname(runner.__file__)
BUNDLE = os.path.join(os.path.dirname(PACKAGE), "runner.py")


def modules():
    return sorted(f for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py")


def parse(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def bound(tree):
    """The names a module binds at module level by def, class or
    assignment (an assignment to an attribute binds nothing)."""
    names = []

    def targets(t):
        if isinstance(t, ast.Name):
            names.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                targets(t)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
            targets(n.target)
    return names


def builtin_or_frozen(name):
    return name in sys.builtin_module_names or _imp.is_frozen(name)


class Bundle(unittest.TestCase):
    longMessage = False

    def test_no_name_bound_twice(self):
        # In the bundle all modules share one namespace: a second binding
        # would silently replace the first.
        owner = {}
        for m in modules():
            for name in bound(parse(os.path.join(PACKAGE, m))):
                self.assertNotIn(name, owner, "%s binds %s, as %s does" % (m, name, owner.get(name)))
                owner[name] = m

    def test_the_bundle_binds_what_the_modules_bind(self):
        want = sorted(n for m in modules() for n in bound(parse(os.path.join(PACKAGE, m))))
        self.assertEqual(sorted(bound(parse(BUNDLE))), want)

    def test_start_up_imports_only_built_in_or_frozen_modules(self):
        for path in [BUNDLE] + [os.path.join(PACKAGE, m) for m in modules()]:
            for n in parse(path).body:
                if isinstance(n, ast.Import):
                    for a in n.names:
                        self.assertTrue(builtin_or_frozen(a.name),
                                        "%s imports %s at start-up" % (path, a.name))

    def test_every_import_is_used(self):
        # An unused import of the runner's own is dead weight in the
        # package form; of a stdlib module, start-up work for nothing.
        for m in modules():
            tree = parse(os.path.join(PACKAGE, m))
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            for n in tree.body:
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    for a in n.names:
                        self.assertIn(a.asname or a.name, used,
                                      "%s imports %s and does not use it" % (m, a.name))

    def test_loading_the_bundle_loads_no_other_module(self):
        probe = ("import sys, _imp\n"
                 "before = set(sys.modules)\n"
                 "exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'), {'__name__': 'probe'})\n"
                 "print(sorted(m for m in set(sys.modules) - before\n"
                 "             if m not in sys.builtin_module_names and not _imp.is_frozen(m)))\n")
        out = subprocess.run([sys.executable, "-I", "-S", "-c", probe, BUNDLE],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(out, "[]\n")


if __name__ == "__main__":
    unittest.main()
