package main

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestRunnerIsCurrent fails when sandbox/pyrunner/runner.py is not the
// bundle of sandbox/pyrunner/runner/*.py: the modules were edited and
// `go generate ./sandbox/pyrunner/` was not run, or runner.py was edited
// by hand.
func TestRunnerIsCurrent(t *testing.T) {
	want, err := bundle(os.DirFS("../../runner"), order)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../runner.py")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("sandbox/pyrunner/runner.py is stale: run go generate ./sandbox/pyrunner/")
	}
}

func TestBundle(t *testing.T) {
	fsys := fstest.MapFS{
		"__init__.py": {Data: []byte(`"""not bundled"""` + "\n")},
		"a.py": {Data: []byte(`"""Module a.

import this_is_prose
"""

import sys
import posix

X = 1
`)},
		"b.py": {Data: []byte(`import sys

from .a import (
    X,
)
from .a import X



def f():
    import json  # indented: left alone



    return X


S = """three blank lines in a string



stay"""
`)},
	}
	got, err := bundle(fsys, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := header + `
import posix
import sys


# ----------------------------------------------------------------------
# runner/a.py

"""Module a.

import this_is_prose
"""

X = 1


# ----------------------------------------------------------------------
# runner/b.py

def f():
    import json  # indented: left alone



    return X


S = """three blank lines in a string



stay"""
`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestBundleRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"from absolute", "from os import path\n", "only `import name`"},
		{"two modules", "import os, sys\n", "only `import name`"},
		{"import as", "import posix as p\n", "only `import name`"},
		{"later module", "from .c import X\n", "not before it"},
		{"itself", "from .b import X\n", "not before it"},
		{"unclosed", "from .a import (\n X,\n", "unclosed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"a.py": {Data: []byte("X = 1\n")},
				"b.py": {Data: []byte(tc.src)},
				"c.py": {Data: []byte("Y = 1\n")},
			}
			_, err := bundle(fsys, []string{"a", "b", "c"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "b.py") {
				t.Errorf("error %v, want one about b.py saying %q", err, tc.want)
			}
		})
	}
	_, err := bundle(fstest.MapFS{"a.py": {Data: []byte("X = 1\n")}, "stray.py": {}}, []string{"a"})
	if err == nil || !strings.Contains(err.Error(), "stray.py") {
		t.Errorf("a module outside the order: %v", err)
	}
	_, err = bundle(fstest.MapFS{"a.py": {Data: []byte("X = 1\n")}}, []string{"a", "gone"})
	if err == nil || !strings.Contains(err.Error(), "gone.py") {
		t.Errorf("a module of the order missing: %v", err)
	}
}
