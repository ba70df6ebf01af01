"""The static check without a sandbox: _check on parsed programs, and the
static phase (_static) writing a real report to a file.

Run by TestPythonUnit (sandbox/pyrunner), or by hand from sandbox/pyrunner:
    python3.11 -I -B -m unittest discover -s runner/tests -t .
"""

import contextlib
import io
import json
import tempfile
import unittest

from runner.config import _load_config
from runner.report import _Report
from runner.static import _check, _static

ALLOW = ["math", "json", "random", "importlib"]
STRICT_DENY = ["eval", "exec", "compile", "__import__", "getattr", "setattr",
               "delattr", "vars", "globals", "locals"]


def config(**over):
    """A config as the Go side writes it, through the runner's own reader."""
    doc = {"mode": "run", "allow": ALLOW, "deny_builtins": None, "deny_events": None,
           "strict_attrs": False, "report_fd": 3, "filename": "<program>",
           "writable_dirs": ["/workspace", "/tmp", "/dev/shm"], "max_violation_lines": 1000,
           "exit_policy_violation": 126, "exit_syntax_error": 1, "outputs": False,
           "preload": [], "max_output_bytes": 4 << 20, "proxy": None,
           "python_mode": "guarded", "restricted_lib": ""}
    doc.update(over)
    return _load_config(["runner", json.dumps(doc)])


def check(src, codegen=False, **over):
    """The violations in src as sorted (kind, name, line, byte col)."""
    found = []
    _check(compile(src, "<program>", "exec", 0x400), config(**over), found, codegen=codegen)
    return sorted((k, n, l, c) for k, n, l, c, _ in found)


def details(src, probe=False, **over):
    found = []
    _check(compile(src, "<program>", "exec", 0x400), config(**over), found, probe=probe)
    return [d for _, _, _, _, d in found]


class Imports(unittest.TestCase):
    def test_each_form(self):
        for src, want in [
            ("import math, os", ("import", "os", 1, 13)),
            ("import os.path as p", ("import", "os", 1, 7)),
            ("from os import path", ("import", "os", 1, 0)),
            ("from os.path import join", ("import", "os", 1, 0)),
            ("x = 1\n__import__('socket')", ("import", "socket", 2, 0)),
            ("__import__('sub' + 'process')", ("import", "subprocess", 1, 0)),
            ("import importlib\nimportlib.import_module('o' + 's')", ("import", "os", 2, 0)),
            ("import importlib\nimportlib.__import__('ctypes')", ("import", "ctypes", 2, 0)),
            ("import importlib as il\nil.import_module('ctypes')", ("import", "ctypes", 2, 0)),
            ("from importlib import import_module as im\nim('subprocess')",
             ("import", "subprocess", 2, 0)),
            ("import importlib\nimportlib.import_module('.x', 'ctypes')", ("import", "ctypes", 2, 0)),
        ]:
            with self.subTest(src=src):
                self.assertEqual(check(src), [want])

    def test_detail_names_the_allowlist(self):
        # Packages (outside the standard library) first, for a model that
        # looks for another module; then the standard library's.
        self.assertEqual(details("import os"), [
            "import of 'os' is not allowed by the policy (allowed: from the standard library "
            "importlib, json, math, random)"])
        many = ["m%d" % i for i in range(12)]
        self.assertEqual(details("import os", allow=many + ["json"]), [
            "import of 'os' is not allowed by the policy (allowed: packages m0, m1, m10, m11, "
            "m2, m3, m4, m5, m6, m7, ... (12 in all); from the standard library json)"])
        self.assertEqual(details("import os", allow=[]), [
            "import of 'os' is not allowed by the policy (allowed: nothing)"])

    def test_detail_says_whether_installed(self):
        # With probe (a run's static check, before the hook), the finders
        # say whether the root has the module at all: installed but not
        # allowed, or missing, so the fix is clear. No module code runs.
        self.assertEqual(details("import os\nimport no_such_module_xyz\nimport sys.monitoring", probe=True), [
            "import of 'os' is not allowed by the policy: it is installed but not in "
            "allowlist.imports (allowed: from the standard library importlib, json, math, random)",
            "import of 'no_such_module_xyz' is not allowed by the policy: no module "
            "'no_such_module_xyz' is installed in this root (allowed: from the standard library "
            "importlib, json, math, random)",
            "import of 'sys' is not allowed by the policy: it is installed but not in "
            "allowlist.imports (allowed: from the standard library importlib, json, math, random)"])
        # An allowed package the root does not have is no alternative:
        # with probe it is left out of the list.
        self.assertEqual(details("import os", allow=["json", "no_such_pkg_xyz", "unittest"], probe=True), [
            "import of 'os' is not allowed by the policy: it is installed but not in "
            "allowlist.imports (allowed: from the standard library json, unittest)"])
        self.assertEqual(details("import os", allow=["json", "no_such_pkg_xyz"]), [
            "import of 'os' is not allowed by the policy (allowed: packages no_such_pkg_xyz; "
            "from the standard library json)"])

    def test_allowed(self):
        self.assertEqual(check("import math\nimport json.decoder\nfrom json import dumps\n"
                               "__import__('random')\nimport importlib\n"
                               "importlib.import_module('json')"), [])

    def test_future_is_always_allowed(self):
        self.assertEqual(check("from __future__ import annotations", allow=[]), [])
        self.assertEqual(check("import math", allow=[]), [("import", "math", 1, 7)])

    def test_computed_names_are_left_to_run_time(self):
        self.assertEqual(check("n = 'os'\n__import__(n)\nimport importlib\n"
                               "importlib.import_module(n)"), [])


class RelativeImports(unittest.TestCase):
    def test_each_form(self):
        for src, name in [
            ("from . import x", "."),
            ("from .mod import x", ".mod"),
            ("from ..pkg import y", "..pkg"),
            ("__import__('x', level=1)", ".x"),
            ("import importlib\nimportlib.import_module('.x')", ".x"),
        ]:
            with self.subTest(src=src):
                got = check(src, allow=ALLOW + ["x", "mod", "pkg"])
                self.assertEqual([(k, n) for k, n, _, _ in got], [("import", name)])
                self.assertIn("relative import", details(src)[0])


class AllowEverything(unittest.TestCase):
    """The policies' "*" reaches the runner as no allowlist (null)."""

    def test_no_import_checks(self):
        self.assertEqual(check("import os, socket\nfrom . import x\n__import__('ctypes')\n"
                               "import importlib\nimportlib.import_module('subprocess')",
                               allow=None), [])

    def test_builtins_still_denied(self):
        self.assertEqual(check("__import__('os')", allow=None, deny_builtins=["__import__"]),
                         [("builtin", "__import__", 1, 0)])

    def test_a_star_in_the_list_is_only_a_name(self):
        self.assertEqual(check("import os", allow=["*"]), [("import", "os", 1, 7)])


class Builtins(unittest.TestCase):
    def test_every_load_of_a_denied_name(self):
        self.assertEqual(check("eval('1')\nf = eval\nexec\n", deny_builtins=["eval", "exec"]),
                         [("builtin", "eval", 1, 0), ("builtin", "eval", 2, 4),
                          ("builtin", "exec", 3, 0)])
        self.assertEqual(details("eval('1')", deny_builtins=["eval"]),
                         ["'eval' is not available under the policy"])

    def test_binding_the_name_is_not_a_use(self):
        self.assertEqual(check("eval = print\n", deny_builtins=["eval"]), [])

    def test_open_is_checked_at_run_time_only(self):
        self.assertEqual(check("open('x').read()\nopen('y', 'w')", deny_builtins=["open"]), [])

    def test_not_denied(self):
        self.assertEqual(check("eval('1')"), [])


class StrictAttrs(unittest.TestCase):
    def test_off(self):
        self.assertEqual(check("import random\nrandom._os\nx = ().__class__\n"
                               "getattr(random, '_os')\nfrom random import _inst\n"
                               "__builtins__\nd = {'__module__': 1}"), [])

    def test_underscore_attributes(self):
        for src, want in [
            ("import random\nrandom._os", ("attribute", "_os", 2, 7)),
            ("x = ().__class__", ("attribute", "__class__", 1, 7)),
            ("x = 1\n(x\n ._y)", ("attribute", "_y", 3, 2)),  # the name after the dot
            ("from random import _inst", ("attribute", "_inst", 1, 19)),
            ("getattr(x, '_y')", ("attribute", "_y", 1, 0)),
            ("setattr(x, '_' + 'y', 1)", ("attribute", "_y", 1, 0)),
            ("hasattr(x, '_y')", ("attribute", "_y", 1, 0)),
            ("match x:\n    case C(_y=1): pass", ("attribute", "_y", 2, 9)),
            ("__builtins__", ("attribute", "__builtins__", 1, 0)),
            ("__loader__", ("attribute", "__loader__", 1, 0)),
            ("__spec__", ("attribute", "__spec__", 1, 0)),
            ("d = {'__module__': 'json'}", ("attribute", "__module__", 1, 5)),
            # A dunder literal is reported once, as a string naming one.
            ("getattr(x, '__len__')", ("attribute", "__len__", 1, 11)),
        ]:
            with self.subTest(src=src):
                self.assertEqual(check(src, strict_attrs=True), [want])

    def test_allowed_under_strict(self):
        self.assertEqual(check("import math\nmath.pi\n_private = 1\n"
                               "def f(_a):\n    return _a\n"
                               "if __name__ == '__main__':\n    pass\n"
                               "s = '__x'\nt = '_y'\nfrom __future__ import annotations",
                               strict_attrs=True), [])

    def test_details(self):
        self.assertEqual(details("random._os", strict_attrs=True), [
            "attribute '_os' starts with an underscore: not allowed under strict_attrs"])
        self.assertEqual(details("__builtins__", strict_attrs=True), [
            "name '__builtins__' reaches the interpreter's internals: not allowed under "
            "strict_attrs"])


class CodeCompiledAtRunTime(unittest.TestCase):
    """codegen: what a library compiles for the program under strict_attrs."""

    def test_refused(self):
        for src, want in [
            ("import os", ("import", "os", 1, 7)),
            ("x.__subclasses__()", ("attribute", "__subclasses__", 1, 2)),
            ("eval('1')", ("builtin", "eval", 1, 0)),
        ]:
            with self.subTest(src=src):
                self.assertEqual(check(src, codegen=True, strict_attrs=True), [want])

    def test_allowed(self):
        # What dataclasses and namedtuple generate: __class__, and a field
        # named like a builtin that the code binds itself.
        self.assertEqual(check("def __init__(self, locals):\n    self.locals = locals\n"
                               "    return self.__class__", codegen=True, strict_attrs=True), [])


class StaticPhase(unittest.TestCase):
    """_static: the report lines, the status line, the exit."""

    def run_static(self, src, **over):
        """(exit code or None, report lines, stderr, returned value)."""
        with tempfile.TemporaryFile() as f:
            cfg = config(report_fd=f.fileno(), **over)
            report = _Report(cfg.fd, cfg.max_lines)
            err = io.StringIO()
            code, ret = None, None
            with contextlib.redirect_stderr(err):
                try:
                    ret = _static(cfg, report, src)
                except SystemExit as e:
                    code = e.code
            f.seek(0)
            lines = [json.loads(l) for l in f.read().decode("ascii").splitlines()]
        return code, lines, err.getvalue(), ret

    def test_ok(self):
        code, lines, err, ret = self.run_static(b"import math\r\nprint(math.pi)\n")
        self.assertEqual((code, lines, err), (None, [{"static": "ok"}], ""))
        self.assertEqual(ret[1], ["import math", "print(math.pi)", ""])

    def test_violations_sorted_with_character_columns(self):
        src = ("import math, os\n"
               "from subprocess import run\n"
               "s = \"\u00e9\"; import socket\n"
               "import os\n").encode("utf-8")
        code, lines, err, _ = self.run_static(src)
        self.assertEqual(code, 126)
        self.assertEqual([(l.get("name"), l.get("line"), l.get("col")) for l in lines[:-1]],
                         [("os", 1, 13), ("subprocess", 2, 0), ("socket", 3, 16), ("os", 4, 7)])
        self.assertEqual(lines[-1], {"static": "violations", "count": 4})
        self.assertIn("<program> breaks the policy (4 violations); nothing was run", err)
        self.assertIn("line 3, col 16: import of 'socket'", err)

    def test_check_mode_summary(self):
        code, _, err, _ = self.run_static(b"import os\n", mode="check")
        self.assertEqual(code, 126)
        self.assertIn("(1 violation); checked only", err)

    def test_the_same_violation_once(self):
        _, lines, _, _ = self.run_static(b"import os; import os\n")
        self.assertEqual(len(lines), 3)  # two positions, one status line

    def test_cap(self):
        src = "".join("import os%d\n" % i for i in range(25)).encode()
        code, lines, err, _ = self.run_static(src, max_violation_lines=3)
        self.assertEqual(code, 126)
        self.assertEqual([l.get("name") for l in lines], ["os0", "os1", "os2", None])
        self.assertEqual(lines[-1], {"static": "violations", "count": 25})
        self.assertIn("line 20, col 7: import of 'os19'", err)  # stderr shows 20
        self.assertIn("... and 5 more", err)

    def test_exit_codes_from_the_config(self):
        code, _, _, _ = self.run_static(b"import os\n", exit_policy_violation=99)
        self.assertEqual(code, 99)
        code, _, _, _ = self.run_static(b"def f(:\n", exit_syntax_error=98)
        self.assertEqual(code, 98)

    def test_syntax_errors(self):
        for src, line, col, msg in [
            (b"x = 1\ny = (\n", 2, 4, "SyntaxError: '(' was never closed"),
            (b"x = 1\n\nif x\n    pass\n", 3, 4, "SyntaxError: expected ':'"),
            (b"x = 1\nreturn x\n", 2, 0, "SyntaxError: 'return' outside function"),
            (b"x = 1\ny = 2\x00\n", 2, 0, "SyntaxError: source code cannot contain null bytes"),
            (b"x = " + b"-" * 200000 + b"1\n", 0, 0,
             "SyntaxError: the program is too deeply nested to compile"),
        ]:
            with self.subTest(msg=msg):
                code, lines, err, _ = self.run_static(src)
                self.assertEqual(code, 1)
                self.assertEqual(lines, [{"static": "syntax_error", "line": line, "col": col,
                                          "detail": msg}])
                self.assertIn(msg, err)
                if line:
                    self.assertIn('File "<program>", line %d' % line, err)
                self.assertNotIn("Traceback", err)

    def test_syntax_error_before_violations(self):
        _, lines, _, _ = self.run_static(b"import os\ndef f(:\n")
        self.assertEqual([l.get("static") for l in lines], ["syntax_error"])


if __name__ == "__main__":
    unittest.main()
