package pyrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnding checks that a run ends as python ends a program (ending.py),
// although the runner skips the interpreter's teardown: threads joined,
// atexit functions run, __main__ released (a file left open is flushed,
// __del__ runs), the streams flushed, a failed flush is status 120.
func TestEnding(t *testing.T) {
	open := with(strictConfig(), func(c *Config) { c.Allow = nil; c.DenyBuiltins = nil; c.StrictAttrs = false })
	for _, tc := range []struct {
		name, prog string
		cfg        Config
		exit       int
		stdout     string // exactly
		stderr     string // contained
		file       string // out.txt's content afterwards, when not ""
	}{
		{name: "atexit after the program", cfg: open,
			prog:   "import atexit\natexit.register(print, 'at exit')\nprint('main')\n",
			stdout: "main\nat exit\n"},
		{name: "atexit after SystemExit, status kept", cfg: open,
			prog: "import atexit\natexit.register(print, 'at exit')\nraise SystemExit(4)\n",
			exit: 4, stdout: "at exit\n"},
		{name: "atexit exception ignored", cfg: open,
			prog:   "import atexit\ndef boom():\n    raise ValueError('in atexit')\natexit.register(boom)\nprint('main')\n",
			stdout: "main\n", stderr: "ValueError: in atexit"},
		{name: "non-daemon thread joined", cfg: open,
			prog:   "import threading, time\ndef late():\n    time.sleep(0.2)\n    print('thread')\nthreading.Thread(target=late).start()\nprint('main')\n",
			stdout: "main\nthread\n"},
		{name: "unterminated line flushed", cfg: strictConfig(),
			prog: "print('no newline', end='')\n", stdout: "no newline"},
		{name: "__del__ of __main__ runs", cfg: strictConfig(),
			prog:   "class C:\n    def __del__(self):\n        print('finalized')\nc = C()\nprint('main')\n",
			stdout: "main\nfinalized\n"},
		{name: "open file flushed", cfg: open,
			prog: "f = open('out.txt', 'w')\nf.write('kept')\n", file: "kept"},
		{name: "weakref.finalize", cfg: open,
			prog:   "import weakref\nclass C: pass\nc = C()\nweakref.finalize(c, print, 'finalizer')\n",
			stdout: "finalizer\n"},
		{name: "failed flush is 120", cfg: open,
			prog: "import sys\nclass Out:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n        raise OSError('disk gone')\nsys.stdout = Out()\n",
			exit: 120, stderr: "OSError: disk gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := runProgram(t, tc.cfg, tc.prog, dir)
			if r.exit != tc.exit || r.signal != 0 || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("want exit %d, stdout %q, stderr with %q\n%s", tc.exit, tc.stdout, tc.stderr, r)
			}
			if tc.file != "" {
				b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
				if err != nil || string(b) != tc.file {
					t.Errorf("out.txt = %q, %v; want %q", b, err, tc.file)
				}
			}
			assertNoRunnerFrames(t, r.stderr)
		})
	}
}
