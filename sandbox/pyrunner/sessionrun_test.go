package pyrunner

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// liveSession is a runner in ModeSession, started with the real
// interpreter outside any sandbox, fed cells as the supervisor feeds them.
type liveSession struct {
	t              *testing.T
	cmd            *exec.Cmd
	cells          io.WriteCloser
	events         chan sessionEvent
	stdout, stderr *os.File // files: a cell's output is what was added since the last cell
	outOff, errOff int64
	cancel         context.CancelFunc
	next           int
}

type sessionEvent struct {
	ev  Event
	err error
}

// cellRun is what one cell gave.
type cellRun struct {
	Cell
	static         *Static
	violations     []Violation
	stdout, stderr string
}

func (c cellRun) String() string {
	return fmt.Sprintf("cell %d %s exit %v truncated %v outputs %q exception %+v static %+v violations %+v\n--- stdout\n%s--- stderr\n%s",
		c.N, c.Status, derefInt(c.ExitCode), c.OutputsTruncated, c.Outputs, c.Exception, c.static, c.violations, c.stdout, c.stderr)
}

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// startSession starts a session runner under cfg (Mode set here) in dir
// with extra environment, and waits for its ready event.
func startSession(t *testing.T, cfg Config, dir string, env ...string) *liveSession {
	t.Helper()
	requirePython(t)
	if dir == "" {
		dir = t.TempDir()
	}
	cfg.Mode, cfg.ReportFD = ModeSession, 3
	if cfg.WritableDirs == nil {
		cfg.WritableDirs = sandboxWritable
	}
	argv, err := Argv(python, runnerPyc(t), cfg)
	if err != nil {
		t.Fatalf("Argv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	s := &liveSession{t: t, cancel: cancel, next: 1}
	s.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	s.cmd.Dir = dir
	s.cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + dir, "PYTHONDONTWRITEBYTECODE=1"}, env...)
	for _, f := range []**os.File{&s.stdout, &s.stderr} {
		if *f, err = os.CreateTemp(t.TempDir(), "out"); err != nil {
			t.Fatal(err)
		}
	}
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if s.cells, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.ExtraFiles = []*os.File{pw}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	pw.Close()
	s.events = make(chan sessionEvent, 64)
	go func() {
		defer pr.Close()
		rd := NewSessionReader(pr, cfg.MaxOutputBytes)
		for {
			ev, err := rd.Next()
			s.events <- sessionEvent{ev, err}
			if err != nil {
				close(s.events)
				return
			}
			if rd.Malformed() != 0 {
				s.events <- sessionEvent{nil, fmt.Errorf("%d malformed report lines", rd.Malformed())}
			}
		}
	}()
	t.Cleanup(func() { s.kill() })
	if ev := s.event(); ev != (Ready{}) {
		t.Fatalf("first event %#v, want Ready\n%s", ev, s.output())
	}
	return s
}

// event returns the next event, failing the test at EOF or on an error.
func (s *liveSession) event() Event {
	s.t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok || e.err != nil {
			s.t.Fatalf("report: %v (open %v)\n%s", e.err, ok, s.output())
		}
		return e.ev
	case <-time.After(30 * time.Second):
		s.t.Fatalf("no event within 30s\n%s", s.output())
	}
	return nil
}

func (s *liveSession) output() string {
	out, _ := os.ReadFile(s.stdout.Name())
	errb, _ := os.ReadFile(s.stderr.Name())
	return "--- stdout\n" + string(out) + "--- stderr\n" + string(errb)
}

// send writes cell n without waiting.
func (s *liveSession) send(src string) int {
	s.t.Helper()
	n := s.next
	s.next++
	if _, err := s.cells.Write(EncodeCell(n, []byte(src))); err != nil {
		s.t.Fatalf("write cell %d: %v", n, err)
	}
	return n
}

// collect reads cell n's events to its cell event, and the output it added.
func (s *liveSession) collect(n int) cellRun {
	s.t.Helper()
	var c cellRun
	if ev := s.event(); ev != (CellStart{N: n}) {
		s.t.Fatalf("event %#v, want CellStart %d", ev, n)
	}
	for {
		switch ev := s.event().(type) {
		case Static:
			c.static = &ev
		case Violation:
			c.violations = append(c.violations, ev)
		case Cell:
			if ev.N != n {
				s.t.Fatalf("cell event for %d, want %d", ev.N, n)
			}
			c.Cell = ev
			c.stdout, s.outOff = s.since(s.stdout, s.outOff)
			c.stderr, s.errOff = s.since(s.stderr, s.errOff)
			return c
		default:
			s.t.Fatalf("event %#v in cell %d", ev, n)
		}
	}
}

func (s *liveSession) since(f *os.File, off int64) (string, int64) {
	s.t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b[off:]), int64(len(b))
}

// run sends a cell and collects it.
func (s *liveSession) run(src string) cellRun {
	s.t.Helper()
	return s.collect(s.send(src))
}

// close ends the session as a caller does (stdin closed) and returns the
// runner's exit code.
func (s *liveSession) close() int {
	s.t.Helper()
	s.cells.Close()
	err := s.cmd.Wait()
	s.cancel()
	return exitCode(err)
}

func (s *liveSession) kill() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	s.cancel()
}

func (s *liveSession) interrupt() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		s.t.Fatal(err)
	}
}

// wantStatus fails unless c has status.
func wantStatus(t *testing.T, c cellRun, status string) {
	t.Helper()
	if c.Status != status {
		t.Fatalf("status %q, want %q\n%s", c.Status, status, c)
	}
}

func laxConfig() Config { return Config{Outputs: true} }

func TestSessionState(t *testing.T) {
	s := startSession(t, laxConfig(), "")
	wantStatus(t, s.run("x = 41\nimport math\nprint('one')\n"), CellOK)
	c := s.run("def f():\n    return x + 1\nprint('two')\n")
	wantStatus(t, c, CellOK)
	if c.stdout != "two\n" || len(c.Outputs) != 0 {
		t.Errorf("cell 2 stdout %q outputs %v", c.stdout, c.Outputs)
	}
	c = s.run("f(), round(math.pi, 2)")
	wantStatus(t, c, CellOK)
	if len(c.Outputs) != 1 || c.Outputs[0].Type != "text/plain" || c.Outputs[0].Data != "(42, 3.14)" {
		t.Errorf("outputs %+v", c.Outputs)
	}
	// An open file persists; stdin is at EOF and holds none of the cells.
	wantStatus(t, s.run("fh = open('f.txt', 'w')\nfh.write('a')\n"), CellOK)
	c = s.run("import sys\nfh.write('b'); fh.close()\nprint(repr(sys.stdin.read()), open('f.txt').read())\n")
	wantStatus(t, c, CellOK)
	if c.stdout != "'' ab\n" {
		t.Errorf("stdout %q", c.stdout)
	}
	if code := s.close(); code != 0 {
		t.Errorf("exit %d after stdin closed\n%s", code, s.output())
	}
}

func TestSessionDisplayRule(t *testing.T) {
	s := startSession(t, laxConfig(), "")
	for _, tc := range []struct {
		src  string
		want []string // type=data
	}{
		{"1; 2", []string{"text/plain=2"}},
		{"x = 5", nil},
		{"None", nil},
		{"print('p')", nil},
		{"x", []string{"text/plain=5"}},
		{"if x:\n    x\n", nil}, // not a bare expression at the end
		{"'é\\n'", []string{"text/plain='é\\n'"}},
		{"class H:\n    def _repr_html_(self):\n        return '<b>h</b>'\n    def __repr__(self):\n        return 'H()'\nH()",
			[]string{"text/html=<b>h</b>", "text/plain=H()"}},
		{"H", []string{"text/plain=<class '__main__.H'>"}}, // a class: no HTML
	} {
		c := s.run(tc.src)
		wantStatus(t, c, CellOK)
		var got []string
		for _, o := range c.Outputs {
			got = append(got, o.Type+"="+o.Data)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: outputs %q, want %q", tc.src, got, tc.want)
		}
	}
	// Outputs off: no displays, the value is computed and dropped.
	s = startSession(t, Config{}, "")
	if c := s.run("print('v'); 42"); c.Status != CellOK || len(c.Outputs) != 0 || c.stdout != "v\n" {
		t.Errorf("outputs off: %s", c)
	}
}

func TestSessionErrors(t *testing.T) {
	s := startSession(t, laxConfig(), "")
	wantStatus(t, s.run("def g():\n    return 1 / 0\n"), CellOK)
	c := s.run("y = 3\ng()\n")
	wantStatus(t, c, CellError)
	e := c.Exception
	if e == nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" ||
		!strings.Contains(e.Traceback, `File "<cell 2>", line 2, in <module>`) ||
		!strings.Contains(e.Traceback, `File "<cell 1>", line 2, in g`) ||
		!strings.Contains(e.Traceback, "return 1 / 0") {
		t.Fatalf("exception %+v", e)
	}
	if !strings.Contains(c.stderr, e.Traceback) {
		t.Errorf("stderr lacks the traceback\n%s", c)
	}
	assertNoRunnerFrames(t, c.stderr)
	// The state before the exception stays.
	if c := s.run("y"); c.Status != CellOK || c.Outputs[0].Data != "3" {
		t.Errorf("after the error: %s", c)
	}
	// SystemExit ends the cell, not the session.
	for _, tc := range []struct {
		src, status string
		code        int
		stderr      string
	}{
		{"raise SystemExit", CellOK, 0, ""},
		{"import sys\nsys.exit(3)", CellError, 3, ""},
		{"import sys\nsys.exit('bye')", CellError, 1, "bye\n"},
		{"raise SystemExit(-1)", CellError, 255, ""},
	} {
		c := s.run(tc.src)
		if c.Status != tc.status || c.ExitCode == nil || *c.ExitCode != tc.code || c.stderr != tc.stderr || c.Exception != nil {
			t.Errorf("%q: %s", tc.src, c)
		}
	}
	// Syntax errors and the compiler's own errors: nothing of the cell runs.
	for _, src := range []string{"print('ran')\ndef (:\n", "print('ran')\nreturn 1\n", "print('ran')\x00"} {
		c := s.run(src)
		if c.Status != CellSyntaxError || c.static == nil || c.static.Status != StaticSyntaxError ||
			c.stdout != "" || !strings.Contains(c.stderr, "SyntaxError") {
			t.Errorf("%q: %s", src, c)
		}
	}
	// An exception in display code is the cell's.
	c = s.run("class R:\n    def __repr__(self):\n        raise ValueError('no repr')\nR()")
	if c.Status != CellError || c.Exception == nil || c.Exception.Name != "ValueError" || len(c.Outputs) != 0 {
		t.Errorf("display error: %s", c)
	}
	assertNoRunnerFrames(t, c.stderr)
	if strings.Contains(c.Exception.Traceback, "_program_call") || strings.Contains(c.Exception.Traceback, SourceName) {
		t.Errorf("traceback shows the runner's program-side frame:\n%s", c.Exception.Traceback)
	}
	// A huge exception message is clipped to what the report line allows.
	c = s.run("raise RuntimeError('é' * 200000)")
	if c.Status != CellError || c.Exception == nil || len(c.Exception.Value) > 200000 ||
		!strings.Contains(c.Exception.Value, "cut by nsbox") {
		t.Errorf("long exception: status %s, value of %d bytes", c.Status, len(c.Exception.Value))
	}
	wantStatus(t, s.run("print('still here')"), CellOK)
}

// waitStdout waits until the session's stdout holds text.
func (s *liveSession) waitStdout(text string) {
	s.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(s.stdout.Name()); strings.Contains(string(b), text) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %q on stdout\n%s", text, s.output())
		}
	}
}

func TestSessionInterrupt(t *testing.T) {
	s := startSession(t, laxConfig(), "")
	// Twice: the second cell runs with Python's default handler again.
	for i := range 2 {
		mark := fmt.Sprintf("looping %d", i)
		n := s.send(fmt.Sprintf("import time\nprint(%q, flush=True)\nwhile True:\n    time.sleep(0.01)\n", mark))
		s.waitStdout(mark)
		s.interrupt()
		c := s.collect(n)
		if c.Status != CellInterrupted || !strings.Contains(c.stderr, "KeyboardInterrupt") || c.Exception != nil {
			t.Fatalf("interrupted cell: %s", c)
		}
		// A SIGINT between cells is ignored; the next cell runs.
		s.interrupt()
		time.Sleep(100 * time.Millisecond)
		wantStatus(t, s.run("print('after')"), CellOK)
	}
	// A program that ignores SIGINT keeps its choice across cells.
	wantStatus(t, s.run("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"), CellOK)
	n := s.send("print('ignoring', flush=True)\ntime.sleep(1)\nprint('slept')")
	s.waitStdout("ignoring")
	s.interrupt()
	if c := s.collect(n); c.Status != CellOK || !strings.HasSuffix(c.stdout, "slept\n") {
		t.Errorf("SIG_IGN cell: %s", c)
	}
	if code := s.close(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestSessionViolations(t *testing.T) {
	cfg := strictConfig()
	cfg.Outputs = true
	s := startSession(t, cfg, "")
	c := s.run("print('ran')\nimport os\n")
	if c.Status != CellPolicyViolation || c.static == nil || c.static.Count != 1 || len(c.violations) != 1 ||
		c.violations[0].Name != "os" || c.violations[0].Line != 2 || c.violations[0].Runtime || c.stdout != "" {
		t.Fatalf("static violation: %s", c)
	}
	wantStatus(t, s.run("import json\nprint(json.dumps([1]))"), CellOK)
	// A module view displays without tripping the attribute rules.
	c = s.run("json")
	if c.Status != CellOK || len(c.violations) != 0 || len(c.Outputs) != 1 || !strings.HasPrefix(c.Outputs[0].Data, "<module 'json'") {
		t.Errorf("a module as the value: %s", c)
	}
	// Runtime violations, de-duplicated and capped per cell: the same one
	// in the next cell is reported again.
	for i := 0; i < 2; i++ {
		c := s.run("import json\nfor i in range(3):\n    try:\n        json.codecs\n    except AttributeError:\n        pass\n")
		if c.Status != CellOK || len(c.violations) != 1 || !c.violations[0].Runtime || c.violations[0].Name != "codecs" {
			t.Errorf("run %d: %s", i, c)
		}
	}
	if code := s.close(); code != 0 {
		t.Errorf("exit %d", code)
	}

	// The program cannot open the runner's cell pipe again, by /proc path
	// or fd, and its stdin holds no cell.
	s = startSession(t, Config{}, "")
	c = s.run("import sys\nrefused = []\nfor fd in range(3, 64):\n" +
		"    for how in ('/proc/self/fd/%d' % fd, fd):\n" +
		"        try:\n            open(how, 'rb', closefd=isinstance(how, str))\n" +
		"        except PermissionError as e:\n            refused.append(str(e))\n" +
		"        except OSError:\n            pass\n" +
		"print(sorted(set(refused)), repr(sys.stdin.read()))\n")
	if c.Status != CellOK || !strings.Contains(c.stdout, "the cell pipe is private to nsbox") ||
		!strings.Contains(c.stdout, "the report channel is private to nsbox") || !strings.HasSuffix(c.stdout, "] ''\n") {
		t.Errorf("private pipes: %s", c)
	}
	wantStatus(t, s.run("print('next')"), CellOK)
}

func TestSessionOutputsCap(t *testing.T) {
	cfg := laxConfig()
	cfg.MaxOutputBytes = 1000
	s := startSession(t, cfg, "")
	c := s.run("class H:\n    def _repr_html_(self):\n        return 'h' * 900\n    def __repr__(self):\n        return 'r' * 200\nH()")
	if c.Status != CellOK || !c.OutputsTruncated || len(c.Outputs) != 1 || c.Outputs[0].Type != "text/html" {
		t.Errorf("capped: %s", c)
	}
	c = s.run("'x' * 5000")
	if c.Status != CellOK || !c.OutputsTruncated || len(c.Outputs) != 0 {
		t.Errorf("over the cap: %s", c)
	}
	c = s.run("'x' * 10")
	if c.Status != CellOK || c.OutputsTruncated || len(c.Outputs) != 1 {
		t.Errorf("under the cap: %s", c)
	}
}

// TestSessionFigures: figures open at the end of a cell come back as PNG
// and are closed; with a stand-in pyplot (the host has no matplotlib;
// the real one is tested in a sandbox by tests/).
func TestSessionFigures(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "lib", "matplotlib")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	pyplot := `_figs = {}
class Figure:
    def __init__(self, n):
        self.n = n
    def savefig(self, f, format=None):
        assert format == "png"
        f.write(b"\x89PNG\r\n\x1a\n" + bytes([self.n]))
def figure(num=None):
    num = num or max(_figs, default=0) + 1
    return _figs.setdefault(num, Figure(num))
def get_fignums():
    return sorted(_figs)
def close(which):
    assert which == "all"
    _figs.clear()
def show():
    pass
`
	for name, src := range map[string]string{"__init__.py": "", "pyplot.py": pyplot} {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startSession(t, laxConfig(), dir, "PYTHONPATH="+filepath.Join(dir, "lib"))
	wantStatus(t, s.run("print('no pyplot yet')"), CellOK)
	c := s.run("import matplotlib.pyplot as plt\nplt.figure(); plt.figure(); plt.show()\n7")
	wantStatus(t, c, CellOK)
	if len(c.Outputs) != 3 || c.Outputs[0].Data != "7" {
		t.Fatalf("outputs %s", c)
	}
	for i, o := range c.Outputs[1:] {
		b, err := base64.StdEncoding.DecodeString(o.Data)
		if o.Type != "image/png" || err != nil || !strings.HasPrefix(string(b), "\x89PNG") || b[len(b)-1] != byte(i+1) {
			t.Errorf("figure %d: %+v, %v", i+1, o, err)
		}
	}
	if c := s.run("plt.get_fignums()"); c.Outputs[0].Data != "[]" {
		t.Errorf("figures left open: %s", c)
	}
}

func TestSessionFrames(t *testing.T) {
	requirePython(t)
	for _, tc := range []struct {
		name, frames string
		code         int
	}{
		{"end of input", "", 0},
		{"bad header", "CELL x 1\nx", ExitRunnerError},
		{"short cell", "CELL 1 10\nx", ExitRunnerError},
		{"long header", "CELL 1 " + strings.Repeat("1", 100) + "\n", ExitRunnerError},
		{"too long", fmt.Sprintf("CELL 1 %d\n", MaxCellBytes+1), ExitRunnerError},
		{"end in header", "CELL 1", ExitRunnerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSession(t, Config{}, "")
			io.WriteString(s.cells, tc.frames)
			if code := s.close(); code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, s.output())
			}
		})
	}
}

// TestCellMaxMirrored: the runner refuses the frames Go would not send.
func TestCellMaxMirrored(t *testing.T) {
	if !strings.Contains(Source, fmt.Sprintf("\nCELL_MAX = %d << 20\n", MaxCellBytes>>20)) || MaxCellBytes&(1<<20-1) != 0 {
		t.Errorf("the runner's CELL_MAX is not MaxCellBytes (%d)", MaxCellBytes)
	}
}

func TestRunOutputs(t *testing.T) {
	r := runProgram(t, Config{Mode: ModeRun, Outputs: true}, "x = 2\nprint('p')\nx * 21\n", "")
	if r.exit != 0 || r.stdout != "p\n" || len(r.report.Outputs) != 1 || r.report.Outputs[0].Data != "42" {
		t.Errorf("%s\noutputs %+v", r, r.report.Outputs)
	}
	// Without outputs, a final expression is only evaluated.
	r = runProgram(t, Config{Mode: ModeRun}, "x = 2\nx * 21\n", "")
	if r.exit != 0 || r.report.Outputs != nil || strings.Contains(r.raw, "outputs") {
		t.Errorf("%s", r)
	}
	// Display code is the program's: its exception fails the run.
	r = runProgram(t, Config{Mode: ModeRun, Outputs: true}, "class R:\n    def __repr__(self):\n        return 1/0\nR()\n", "")
	if r.exit != 1 || r.report.Outputs != nil || !strings.Contains(r.stderr, "ZeroDivisionError") {
		t.Errorf("%s", r)
	}
	assertNoRunnerFrames(t, r.stderr)
	// The program failed: no outputs line.
	r = runProgram(t, Config{Mode: ModeRun, Outputs: true}, "1/0\n", "")
	if r.exit != 1 || r.report.Outputs != nil {
		t.Errorf("%s", r)
	}
}

func TestPreload(t *testing.T) {
	r := runProgram(t, Config{Mode: ModeRun, Allow: []string{"json", "sys"}, Preload: []string{"json"}},
		"import sys\nprint('json' in sys.modules)\n", "")
	if r.exit != 0 || r.stdout != "True\n" {
		t.Errorf("%s", r)
	}
	s := startSession(t, Config{Allow: []string{"json", "sys", "email"}, Preload: []string{"json", "email.message"}}, "")
	if c := s.run("import sys\nprint('email.message' in sys.modules)"); c.stdout != "True\n" {
		t.Errorf("%s", c)
	}
	// The runner refuses a preload the allowlist refuses (Go refuses it first).
	out, err := execRunner(t, strings.Replace(mustConfigJSON(t, Config{Mode: ModeRun, Allow: []string{"json"}, ReportFD: 3,
		WritableDirs: []string{"/workspace"}}), `"preload":[]`, `"preload":["socket"]`, 1))
	if exitCode(err) != ExitRunnerError || !strings.Contains(out, "not allowed by allow") {
		t.Errorf("%v: %s", err, out)
	}
	out, err = execRunner(t, strings.Replace(mustConfigJSON(t, Config{Mode: ModeRun, ReportFD: 3,
		WritableDirs: []string{"/workspace"}}), `"preload":[]`, `"preload":["nosuchmodule"]`, 1))
	if exitCode(err) != ExitRunnerError || !strings.Contains(out, "preload nosuchmodule: ModuleNotFoundError") {
		t.Errorf("%v: %s", err, out)
	}
}

func mustConfigJSON(t *testing.T, c Config) string {
	t.Helper()
	s, err := encodeConfig("python", c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSessionDatasci: a DataFrame displays as HTML and text, a real
// matplotlib figure as a PNG that decodes, under the datasci policy's
// Python layer, with the datasci root's packages on the host's python.
func TestSessionDatasci(t *testing.T) {
	site := rootSite(t, "datasci", "pandas")
	cfg := Config{Allow: DatasciAllow, DenyBuiltins: []string{"open"}, DenyEvents: DefaultDenyEvents,
		Outputs: true, Preload: []string{"numpy", "pandas", "matplotlib.pyplot"}}
	s := startSession(t, cfg, "", "PYTHONPATH="+site, "MPLBACKEND=Agg", "OMP_NUM_THREADS=1")
	wantStatus(t, s.run("import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(1000), 'b': np.arange(1000) * 2.0})"), CellOK)
	c := s.run("df.describe()")
	if c.Status != CellOK || len(c.Outputs) != 2 || c.Outputs[0].Type != "text/html" ||
		!strings.Contains(c.Outputs[0].Data, "<table") || c.Outputs[1].Type != "text/plain" ||
		!strings.Contains(c.Outputs[1].Data, "count  1000.000000") {
		t.Fatalf("describe: %s", c)
	}
	c = s.run("import matplotlib.pyplot as plt\nplt.plot(df.a, df.b)\nplt.title('x')\nplt.show()\n")
	if c.Status != CellOK || len(c.Outputs) != 1 || c.Outputs[0].Type != "image/png" {
		t.Fatalf("figure: %s", c)
	}
	pngData, err := base64.StdEncoding.DecodeString(c.Outputs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(pngData)); err != nil {
		t.Errorf("the figure is not a PNG: %v", err)
	}
	if c := s.run("len(plt.get_fignums())"); c.Status != CellOK || c.Outputs[0].Data != "0" {
		t.Errorf("figures left open: %s", c)
	}
	// Preloading changes nothing the guard checks: a denied event is
	// still refused, an unlisted module still not imported.
	c = s.run("import os\nos.system('true')")
	if c.Status != CellError || len(c.violations) != 1 || c.violations[0].Name != "os.system" {
		t.Errorf("denied event: %s", c)
	}
	c = s.run("import subprocess")
	if c.Status != CellPolicyViolation {
		t.Errorf("denied import: %s", c)
	}
}

// TestSessionCellTimes logs how long a df.describe() cell with its
// displays takes in a warm session: the runner's share of a session
// cell (no sandbox, no supervisor). -v shows the figures.
func TestSessionCellTimes(t *testing.T) {
	site := rootSite(t, "datasci", "pandas")
	cfg := Config{Allow: DatasciAllow, DenyBuiltins: []string{"open"}, DenyEvents: DefaultDenyEvents,
		Outputs: true, Preload: []string{"numpy", "pandas"}}
	s := startSession(t, cfg, "", "PYTHONPATH="+site, "OMP_NUM_THREADS=1")
	wantStatus(t, s.run("import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(1000), 'b': np.arange(1000) * 2.0})"), CellOK)
	var times []time.Duration
	for range 50 {
		start := time.Now()
		wantStatus(t, s.run("df.describe()"), CellOK)
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	t.Logf("df.describe() cell, %d runs: p50 %v, p90 %v, max %v", len(times), times[len(times)/2],
		times[len(times)*9/10], times[len(times)-1])
}
