"""nsbox's Python runner, as a package of modules by concern.

The sandbox never imports this package: the Go bundler
(sandbox/pyrunner/internal/bundle, run by `go generate`) concatenates the
modules in a fixed order into one file, sandbox/pyrunner/runner.py, which
the rootfs builder compiles into each root. In that file every module
shares one globals dict, which is how the guard tells the runner's frames
from the program's (guard.py). The package form exists for the
plain-Python unit tests in tests/.

Rules the bundler checks, so that both forms mean the same:
  - at module level, a module imports stdlib modules only as
    `import name` (built-in or frozen ones: see bound.py), and other
    runner modules only as `from .module import name, ...`, from a module
    earlier in the order;
  - no two modules bind the same name at module level (tests/test_bundle.py).
"""
