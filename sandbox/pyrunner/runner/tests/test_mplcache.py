"""Seeding matplotlib's font cache (mplcache.py), with the root's cache
directory pointed at a temporary one: what is copied, and everything it
leaves alone.

Run by TestPythonUnit (sandbox/pyrunner), or by hand from sandbox/pyrunner:
    python3.11 -I -B -m unittest discover -s runner/tests -t .
"""

import os
import posix
import tempfile
import unittest

from runner import mplcache


class Seed(unittest.TestCase):

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.src = os.path.join(self.tmp, "root-cache")
        os.mkdir(self.src)
        with open(os.path.join(self.src, "fontlist-v1.json"), "w") as f:
            f.write('{"_version": "1"}' * 10000)  # more than one read
        os.mkdir(os.path.join(self.src, "subdir"))  # not a file: not copied
        saved_dir, saved_env = mplcache.MPL_CACHE_DIR, posix.environ.get(b"MPLCONFIGDIR")
        mplcache.MPL_CACHE_DIR = self.src

        def restore():
            mplcache.MPL_CACHE_DIR = saved_dir
            if saved_env is None:
                posix.environ.pop(b"MPLCONFIGDIR", None)
            else:
                posix.environ[b"MPLCONFIGDIR"] = saved_env
        self.addCleanup(restore)

    def seed(self, value):
        if value is None:
            posix.environ.pop(b"MPLCONFIGDIR", None)
        else:
            posix.environ[b"MPLCONFIGDIR"] = os.fsencode(value)
        mplcache._seed_matplotlib()

    def test_copies_into_a_new_directory(self):
        dst = os.path.join(self.tmp, "a", "b", "matplotlib")
        self.seed(dst)
        self.assertEqual(os.listdir(dst), ["fontlist-v1.json"])
        with open(os.path.join(dst, "fontlist-v1.json")) as f:
            self.assertEqual(f.read(), '{"_version": "1"}' * 10000)
        # A copy, not a link to the root's file.
        self.assertFalse(os.path.samefile(os.path.join(dst, "fontlist-v1.json"),
                                          os.path.join(self.src, "fontlist-v1.json")))

    def test_keeps_what_is_there(self):
        dst = os.path.join(self.tmp, "mpl")
        os.mkdir(dst)
        with open(os.path.join(dst, "fontlist-v1.json"), "w") as f:
            f.write("mine")
        with open(os.path.join(dst, "matplotlibrc"), "w") as f:
            f.write("backend: agg\n")
        self.seed(dst + "/")
        with open(os.path.join(dst, "fontlist-v1.json")) as f:
            self.assertEqual(f.read(), "mine")
        self.assertEqual(sorted(os.listdir(dst)), ["fontlist-v1.json", "matplotlibrc"])

    def test_nothing_without_the_variable_or_the_files(self):
        before = sorted(os.listdir(self.tmp))
        self.seed(None)
        self.seed("")
        self.seed("relative/matplotlib")  # matplotlib's to resolve, not the runner's
        self.assertFalse(os.path.exists("relative"))
        mplcache.MPL_CACHE_DIR = os.path.join(self.tmp, "no-such-root-cache")
        self.seed(os.path.join(self.tmp, "unseeded"))
        self.assertEqual(sorted(os.listdir(self.tmp)), before)

    def test_a_file_in_the_way(self):
        blocker = os.path.join(self.tmp, "file")
        with open(blocker, "w") as f:
            f.write("x")
        self.seed(os.path.join(blocker, "matplotlib"))  # no error, nothing made
        with open(blocker) as f:
            self.assertEqual(f.read(), "x")

    def test_symlink_not_followed(self):
        dst = os.path.join(self.tmp, "mpl")
        os.mkdir(dst)
        target = os.path.join(self.tmp, "target")
        os.symlink(target, os.path.join(dst, "fontlist-v1.json"))
        self.seed(dst)
        self.assertFalse(os.path.lexists(target))


if __name__ == "__main__":
    unittest.main()
