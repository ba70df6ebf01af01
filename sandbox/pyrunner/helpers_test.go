package pyrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// python is the interpreter the tests run the runner with: Debian 12's, the
// one the base root is built from.
const python = "/usr/bin/python3.11"

// mustWork reports whether a missing interpreter must fail the tests rather
// than skip them (CI sets NSBOX_MUST_WORK=1).
func mustWork() bool { return os.Getenv("NSBOX_MUST_WORK") == "1" }

// testDir holds what the tests share: the compiled runner.
var testDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pyrunner-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var compiled struct {
	once sync.Once
	path string
	err  error
}

// runnerPyc returns the runner compiled as a root's builder compiles it,
// the only form it starts from.
func runnerPyc(t *testing.T) string {
	t.Helper()
	requirePython(t)
	compiled.once.Do(func() {
		compiled.path = filepath.Join(testDir, "runner.pyc")
		compiled.err = Compile(context.Background(), python, compiled.path)
	})
	if compiled.err != nil {
		t.Fatal(compiled.err)
	}
	return compiled.path
}

// rootSite returns the site-packages of the built-in root name (make
// datasci, make web), whose packages are built for the host's python3.11
// and so run outside a sandbox too, checked by the package probe in it.
// It skips when the root is not built, or fails under NSBOX_MUST_WORK=1
// (make test builds the roots first). The package cannot ask
// sandbox/roots, which imports it.
func rootSite(t *testing.T, name, probe string) string {
	t.Helper()
	roots := os.Getenv("NSBOX_ROOTS_DIR")
	if roots == "" {
		roots = "/var/lib/nsbox/roots"
	}
	site := filepath.Join(roots, name, "venv", "lib", "python3.11", "site-packages")
	if _, err := os.Stat(filepath.Join(site, probe)); err != nil {
		if mustWork() {
			t.Fatalf("the %s root is not built (make %s): %v", name, name, err)
		}
		t.Skipf("the %s root is not built (make %s): %v", name, name, err)
	}
	return site
}

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		if mustWork() {
			t.Fatalf("%s: %v (NSBOX_MUST_WORK=1)", python, err)
		}
		t.Skipf("%s: %v", python, err)
	}
}

// sandboxWritable is Config.WritableDirs as the supervisor passes it: where
// the OS sandbox lets the program write. The tests' temporary directories
// lie under /tmp, so code a program writes there is its own, as in a
// sandbox.
var sandboxWritable = []string{"/workspace", "/tmp", "/dev/shm"}

// runResult is one finished run of the runner.
type runResult struct {
	exit     int // exit status; -1 when killed by a signal
	signal   int // the signal, when killed by one
	stdout   string
	stderr   string
	raw      string // the report as written
	report   Report
	parseErr error
}

func (r runResult) String() string {
	return "exit " + strconv.Itoa(r.exit) + " signal " + strconv.Itoa(r.signal) +
		"\n--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr + "--- report\n" + r.raw
}

// runProgram runs program under cfg with the real interpreter, the report
// pipe as fd 3 and the program on stdin, in dir (a temporary directory when
// dir is "").
func runProgram(t *testing.T, cfg Config, program, dir string) runResult {
	t.Helper()
	return runProgramEnv(t, cfg, program, dir, nil)
}

// runProgramEnv is runProgram with env added to the program's environment.
func runProgramEnv(t *testing.T, cfg Config, program, dir string, env []string) runResult {
	t.Helper()
	return runProgramInput(t, cfg, program, dir, env, "")
}

// runProgramInput is runProgramEnv with stdin, after the program's frame,
// as the program's standard input.
func runProgramInput(t *testing.T, cfg Config, program, dir string, env []string, stdin string) runResult {
	t.Helper()
	requirePython(t)
	if dir == "" {
		dir = t.TempDir()
	}
	cfg.ReportFD = 3
	if cfg.WritableDirs == nil {
		cfg.WritableDirs = sandboxWritable
	}
	argv, err := Argv(python, runnerPyc(t), cfg)
	if err != nil {
		t.Fatalf("Argv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + dir, "PYTHONDONTWRITEBYTECODE=1"}, env...)
	cmd.Stdin = io.MultiReader(bytes.NewReader(EncodeProgram([]byte(program))), strings.NewReader(stdin))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		pw.Close()
		t.Fatalf("start %s: %v", python, err)
	}
	pw.Close()
	raw := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(pr) // drained while the program runs, as the supervisor must
		raw <- b
	}()
	werr := cmd.Wait()
	var r runResult
	r.stdout, r.stderr = stdout.String(), stderr.String()
	b := <-raw
	r.raw = string(b)
	r.report, r.parseErr = ParseReport(bytes.NewReader(b))
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		r.exit = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signal = int(ws.Signal())
		}
	default:
		t.Fatalf("wait: %v", werr)
	}
	if ctx.Err() != nil {
		t.Fatalf("runner timed out\n%s", r)
	}
	if r.parseErr != nil || r.report.Malformed != 0 {
		t.Fatalf("report: %v, %d malformed lines\n%s", r.parseErr, r.report.Malformed, r)
	}
	return r
}

// strictConfig is the strict policy's Python layer as the brief's table
// uses it: StrictAllow, the getattr family and the exec family denied,
// strict attributes; open is left alone so programs can write canaries.
func strictConfig() Config {
	return Config{
		Mode:  ModeRun,
		Allow: StrictAllow,
		DenyBuiltins: []string{"eval", "exec", "compile", "__import__", "getattr",
			"setattr", "delattr", "vars", "globals", "locals"},
		StrictAttrs: true,
	}
}

func with(c Config, f func(*Config)) Config {
	f(&c)
	return c
}

func plus(list []string, more ...string) []string {
	return append(append([]string{}, list...), more...)
}

// runnerFuncs are the names of the runner's functions and classes, which
// must never show up in a user's traceback.
func runnerFuncs(t *testing.T) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(?:def|class) (\w+)`).FindAllStringSubmatch(Source, -1)
	if len(m) < 20 {
		t.Fatalf("found only %d runner functions", len(m))
	}
	var names []string
	for _, s := range m {
		if !strings.HasPrefix(s[1], "__") { // __init__ and the like are everyone's
			names = append(names, s[1])
		}
	}
	return names
}

// assertNoRunnerFrames fails if stderr shows a frame of the runner: its
// file (SourceName) or one of its functions.
func assertNoRunnerFrames(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, `File "`+SourceName+`"`) {
		t.Errorf("traceback shows the runner's file:\n%s", stderr)
	}
	for _, f := range runnerFuncs(t) {
		if strings.Contains(stderr, ", in "+f+"\n") {
			t.Errorf("traceback shows runner function %s:\n%s", f, stderr)
		}
	}
}

// execRunner runs the runner with a raw config argument, an empty program
// and /dev/null as fd 3; it returns stdout and stderr together.
func execRunner(t *testing.T, config string) (string, error) {
	t.Helper()
	return execRunnerStdin(t, config, string(EncodeProgram(nil)))
}

// execRunnerStdin is execRunner with stdin as the runner's whole input.
func execRunnerStdin(t *testing.T, config, stdin string) (string, error) {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := exec.Command(python, append(append([]string{}, flags...), runnerPyc(t), config)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.ExtraFiles = []*os.File{null}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// exitCode returns the exit status in err, 0 for nil, -1 otherwise.
func exitCode(err error) int {
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
