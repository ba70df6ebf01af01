// Package pyrunner holds the Python runner nsbox starts inside the sandbox,
// and the Go side of its protocol: the command line (Argv), the
// config, the compiled form (Compile, CompiledPath), the parser for the
// violations it reports (ParseReport), the program's frame (EncodeProgram),
// and for sessions the cell frames (EncodeCell) and the event reader
// (NewSessionReader).
//
// The runner is the fourth layer of a run and its telemetry: it checks the
// program's imports and builtins against the policy before anything runs,
// guards them again while it runs, and reports every violation. It is
// policy and telemetry, not the security boundary: namespaces, the
// read-only root, seccomp, Landlock and the cgroup are. Python cannot
// sandbox Python; see "Limits" below.
//
// # Layout
//
// The runner's source is the Python package runner/, one module per
// concern, in the order they are bundled:
//
//	bound.py       the modules imported and the names bound at start-up
//	paths.py       abspath and realpath without os
//	config.py      the config argument; EXIT_RUNNER
//	report.py      the report channel
//	jsonw.py       a JSON writer for the report's nested lines
//	static.py      the static check
//	venvsite.py    site's work for nsbox's venv (the interpreter runs with -S)
//	mplcache.py    matplotlib's font cache, seeded from the root (MatplotlibCacheDir)
//	network.py     the network check under a proxy (Config.Proxy)
//	guard.py       the audit hook and the run-time checks; the invariants
//	views.py       what the program is handed: __import__, stubs, module views
//	restricted.py  python.mode "restricted": RestrictedPython's compiler with nsbox's rules
//	restricted_guards.py  its guards and builtins, what the compiled program calls
//	tracebacks.py  tracebacks without the runner's frames
//	arm.py         arming the guard before the program (a run, a session)
//	display.py     display outputs: a final expression's value, figures
//	session.py     session mode: cells on stdin, one __main__
//	main.py        the steps of a run, in order
//
// `go generate` (internal/bundle) joins them into runner.py, embedded as
// Source: one module, so one code object to load and one globals dict,
// by which the guard tells its own frames from the program's. The rootfs
// builder compiles Source with the root's interpreter (Compile) to
// CompiledPath in the root, whose name carries a hash of Source; a root
// without it was built for another nsbox and must be rebuilt. The runner
// imports only built-in and frozen modules at start-up. runner/tests holds
// plain-Python unit tests (the static check, the bundle), run by go test.
//
// # Protocol
//
// The supervisor execs Argv(interp, CompiledPath(), cfg):
//
//	interp -S -s -P <compiled runner> <config JSON>
//
// (-S: no site, whose work the runner does itself for nsbox's venv; -s: no
// user site directory; -P: no script directory on sys.path). The config is
// Config plus the protocol's constants, which come from Go so that each
// lives in one place: MaxViolationLines, ExitPolicyViolation and
// ExitSyntaxError. ExitRunnerError is the one the runner must know before
// it reads the config; a test keeps its copy equal. Every key is required.
// The program arrives on stdin in one frame, EncodeProgram's:
// "PROGRAM <length>\n" and exactly length bytes of source. The runner
// reads exactly the frame with posix.read on fd 0, never through
// sys.stdin, so that whatever the caller writes after it is the program's
// standard input, all of it, in sys.stdin (never read before the
// program) and on fd 0 for its children; the caller then closes the pipe
// and the program finds EOF. A caller with no input for the program
// closes the pipe right after the frame. A program that does not read
// its input leaves it unread: the caller's writes fail with EPIPE once
// the run ends, which is not an error. A malformed frame, or end of input
// before the frame is whole, is the caller's bug: ExitRunnerError. The
// report channel is an inherited pipe,
// Config.ReportFD (fd 3 when passed as the first of exec.Cmd.ExtraFiles);
// the runner marks it close-on-exec at once and writes to it only with
// posix.write bound at start. The supervisor must drain the pipe while the
// program runs.
//
// Each report line is one JSON object:
//
//	{"kind":"import","name":"os","line":3,"col":0,"detail":"import of 'os' is not allowed by the policy: it is installed but not in allowlist.imports (allowed: ...)"}
//
// kind is import, builtin, event, attribute or network; line is 1-based, col 0-based
// in characters; both are 0 when no line of the program is to blame. First
// comes {"kind":"ready"}, written once the runner has done its own work
// (site, config, preload) and before it reads the program, so that a
// supervisor holding a sandbox started ahead knows when it is fully warm
// (Report.Ready). Then come the static violations, sorted by position, at most MaxViolationLines
// of them; then exactly one status line:
//
//	{"static":"ok"}
//	{"static":"violations","count":N}      (N counts them all, written or not)
//	{"static":"syntax_error","line":L,"col":C,"detail":"SyntaxError: ..."}
//
// The status line is written before any of the program runs, so it cannot
// be forged by the program. Runtime violations follow it: a denied event,
// a refused raw extension module and a change to the runner's functions
// each time they happen (col 0), the others de-duplicated by (kind, name,
// line, col) and capped at MaxViolationLines. A line after the status
// line that is not a valid report line was written by the program: the
// first is recorded as a runtime violation named ForgedLine (in a session,
// the first while a cell runs, as that cell's: SessionReader). When the
// runner must report a refusal but the report fd is no longer the report
// pipe (the program closed or replaced it), it exits ExitPolicyViolation
// with the reason on stderr. A program killed mid-run leaves a report
// without its tail; ParseReport tolerates that.
//
// Exit codes: ExitPolicyViolation when the static check found violations
// (a human summary goes to stderr and nothing runs); ExitSyntaxError for a
// syntax error (the normal SyntaxError message, with Config.Filename and
// the line, on stderr), and 1 for an uncaught exception (a traceback
// without the runner's frames); the program's own code for SystemExit;
// death by SIGINT for KeyboardInterrupt, as python does (after the
// program's threads, atexit functions and the flush of its streams,
// without the interpreter's teardown: runner/ending.py; 120 when that
// flush fails); ExitRunnerError
// when the config or the report fd is unusable, which is the supervisor's
// bug. In mode "check" the runner stops after the status line.
//
// Config.Preload names modules the runner imports as its own before the
// hook is armed (mode run: before its ready line and the program; mode session:
// before the first cell); each must be allowed (Validate, and the runner
// again). The program finds them loaded, as after its own import of them.
//
// # Display outputs
//
// With Config.Outputs, after the program (mode run) or each cell (mode
// session), the runner collects what a notebook would show: when the last
// statement is a bare expression (compiled apart, for eval) and its value
// is not None, {"type":"text/html","data":value._repr_html_()} if its type
// has _repr_html_, then {"type":"text/plain","data":repr(value)}; then,
// if matplotlib.pyplot is loaded, every open figure as
// {"type":"image/png","data":<base64>}, and the figures are closed. The
// runner calls the program's objects from a frame of the program's
// (guard.py, invariant 11): they run and are checked as the program, and
// what they raise is the program's. The encoded outputs are capped at
// Config.MaxOutputBytes: the first output past it and the rest are
// dropped, and truncated is set. Mode run writes them after the program,
// as one line (Report.Outputs):
//
//	{"kind":"outputs","outputs":[{"type":"text/plain","data":"42"}],"truncated":false}
//
// # Session mode
//
// In ModeSession the runner reads cells, not a program, from stdin: it
// keeps a close-on-exec copy of fd 0 for itself (the open check refuses
// it to the program, as the report pipe) and puts /dev/null on fd 0 (the
// program's stdin is at EOF: a cell has no input); it preloads, arms the guard
// once (the program's __main__ then lives as long as the session:
// variables, functions, imports, open files), writes {"kind":"ready"},
// and reads frames, EncodeCell's: "CELL <n> <length>\n" and length bytes
// of source, at most MaxCellBytes. End of input between frames: exit 0
// (the program's atexit handlers and threads end as at a run's end). A
// malformed frame: ExitRunnerError. For each cell:
//
//	{"kind":"cell-start","n":N}
//	violation lines and one status line, as a run's static check; the
//	    cell is named "<cell N>" in tracebacks; nothing exits
//	runtime violation lines (their cap and de-duplication restart per cell)
//	{"kind":"cell","n":N,"status":S,"exit_code":K,"outputs":[...],"truncated":false,
//	 "exception":{"name":"ZeroDivisionError","value":"division by zero","traceback":"..."}}
//
// S is CellOK, CellError (an uncaught exception, printed on stderr as a
// run prints it, with exception; or SystemExit with a non-zero code),
// CellInterrupted (KeyboardInterrupt: SIGINT, forwarded by the sandbox's
// reaper, ends the cell; between cells SIGINT is ignored, and a cell runs
// with the program's own SIGINT handler, Python's default at first),
// CellPolicyViolation or CellSyntaxError (nothing of the cell ran).
// exit_code is there when SystemExit ended the cell: the code a process
// would exit with (None 0, an integer its low byte, else 1 with the
// value on stderr); the session goes on, as in IPython. Each exception
// field is clipped to 64 KiB encoded (the traceback keeps its end). The
// runner flushes sys.stdout and sys.stderr before the cell line, so all
// the cell's output precedes it in the pipes; output of the program's
// threads after that is the next cell's.
//
// SessionReader returns these as events (Ready, CellStart, Violation,
// Static, Cell) and bounds every line (Config.MaxLine). Everything on the
// report is written by the sandboxed process: in a session the program's
// earlier cells (a thread, a signal handler) may write it at any time
// where the policy allows os, so from the first cell on every line,
// status lines included, is the program's word. A caller decides
// timeout, memory_limit and killed itself; those outrank what the report
// says, and a forged cell line can only end the program's own cell early.
//
// # What the runner enforces
//
// Static check (modes run and check): the whole program is parsed and
// compiled, and every violation is collected at once:
//   - imports whose top-level name is not in Config.Allow: import x.y,
//     from x import y, __import__("x"), importlib.import_module("x") and
//     importlib.__import__("x") (string literals, "o"+"s" folded), and every
//     relative import (a program is not part of a package); __future__ is
//     always allowed; a nil Allow turns all import checks off;
//   - every load of a name in Config.DenyBuiltins ("open" is checked at run
//     time only: reading is always allowed);
//   - with StrictAttrs: every attribute name starting with "_" (x._y,
//     getattr(x, "_y") and its family with a literal, from m import _y,
//     match patterns C(_y=...)), the names __builtins__, __loader__ and
//     __spec__, and string literals that name a dunder ("__class__").
//
// Run time (mode run), installed before the program's first line:
//   - the program's builtins are a copy: __import__ is a guard that checks
//     the allowlist for import statements, __import__() calls and code the
//     program execs; denied builtins are stubs that report and raise
//     PermissionError; the real builtins module is untouched, so the
//     standard library and allowed packages import what they need (pandas
//     importing os works under an allowlist without os);
//   - an audit hook (PEP 578, sys.addaudithook; Python code cannot remove
//     it) refuses Config.DenyEvents with PermissionError; checks module
//     loads the program starts by other routes (importlib.import_module with
//     a computed name, importlib.util loaders, code it wrote itself);
//     with "open" denied, refuses opening for writing outside
//     Config.WritableDirs, /dev/null, /dev/stdout and /dev/stderr, by any
//     code while the program runs (shutil.copy must not launder a write);
//     always refuses opening the report pipe again, by number, dup or
//     /proc path;
//   - with StrictAttrs: modules are handed to the program as read-only
//     views whose module-valued attributes are handed over only if allowed
//     (json.codecs, codecs.sys: AttributeError and an import violation);
//     underscore names are refused at run time too, including through
//     operator.attrgetter, operator.methodcaller and string.Formatter
//     fields; reading gi_frame, cr_frame, tb_frame, f_code or __code__
//     from the program's code is refused (a frame leads to every module's
//     globals); code compiled at run time must pass the attribute rules
//     when the program compiles it, and must not reach for internals
//     (__subclasses__, __globals__, ...) when a library compiles it for the
//     program (typing.get_type_hints on string annotations).
//
// An import is the program's own when the nearest frame outside the runner
// and importlib runs with the program's builtins, was compiled by it, or
// comes from a file in Config.WritableDirs; imports made by allowed
// modules, and by C code on the program's behalf (datetime.strptime loading
// _strptime), are internal and pass.
//
// # Limits
//
// Known ways around this layer, each left to the OS sandbox:
//   - Without StrictAttrs (the default policy) object graphs are open:
//     sys.modules, module attributes (json.codecs.sys), frames and gc reach
//     every loaded module, including ones the allowlist refuses, and every
//     object of the runner. What holds whatever the program changes there
//     is the hook's first half (runner/guard.py, invariants 1 and 2): the
//     denied events, the raw extension modules (_posixsubprocess, whose
//     fork_exec raises no audit event, is a stub where subprocess.Popen is
//     denied; _ctypes where the allowlist names no package beyond the
//     standard library; _xxsubinterpreters; CPython's test modules) and
//     the runner's functions read-only. The import, write, compile and network checks
//     read state the program can change: against a program that does,
//     they only record what it does not hide.
//   - Where the allowlist names a package beyond the standard library,
//     ctypes is not kept out (pandas and numpy import it whatever they use
//     it for): code the program runs as library code (below) loads it, or
//     finds it loaded. Native calls can do anything in the process,
//     including undo the audit hook.
//   - A module a preload loaded before the hook is armed stays as it is
//     (datasci's matplotlib loads subprocess and the real _posixsubprocess:
//     there fork_exec starts a process without an audit event).
//   - The roots' Python has _posixsubprocess (and _socket) built in, and
//     importlib's BuiltinImporter.create_module makes a fresh copy of a
//     built-in module without any audit event: a program that reaches
//     importlib.machinery or _imp (default) starts a process with its
//     fork_exec, neither refused nor recorded. Only the OS layer can
//     refuse that (seccomp refusing fork and clone without CLONE_THREAD
//     where the policy denies process events).
//   - Code running as library code imports unchecked (but for the raw
//     extension modules): code the program runs through modules that
//     compile and exec strings with the real builtins (code, timeit,
//     doctest, pdb, trace). strict excludes all of those.
//   - __import__(name, g, g, [], 0) with the program's own globals g is
//     how C code imports its helpers (datetime.strptime loads _strptime);
//     the guard loads such a module unchecked and returns None. The module
//     is then in sys.modules, which only a policy allowing sys reaches, and
//     the call needs globals(), which strict denies.
//   - Deny lists of builtins are advisory where the allowlist lets the
//     program around them (builtins.eval with builtins allowed). With os
//     allowed, os.write to the report fd forges whole runtime lines (and
//     so does calling the runner's own writer, which a program reaches
//     through gc); a spoilt or part line is recorded as a violation
//     (ForgedLine), and a closed or replaced report fd ends the run at the
//     next refusal. The static status line is always the runner's.
//   - A signal handler of the program that raises inside the hook can keep
//     a refusal's line from being written, never the refusal.
//   - str.format reads underscore attributes ("{0.__class__}") but yields
//     only text. Code a library generates from strings it got from the
//     program (dataclasses field names, computed type() namespaces) is
//     checked only for escape attributes, imports and eval-like names.
//   - The write check resolves symlinks when the file is opened (a race
//     with a program swapping them remains) and cannot see dir_fd-relative
//     paths. Landlock enforces the writable set for real.
//   - importlib.machinery can load native code the program wrote itself;
//     Python has no audit event for it. The allowlists keep importlib out of
//     strict.
//   - A program's callable that is not Python code (functools.partial of
//     a builtin, a builtin as a method or as __del__) runs as whatever
//     frame is current: called by a library (json's object_hook, traceback
//     printing to a sys.stderr the program replaced), or by the garbage
//     collector while the runner's own code runs (checking the next cell),
//     its events are taken for that frame's, and exec or eval in it gets
//     that frame's globals. Under strict no such callable runs code (exec,
//     eval and compile are denied); without strict, frames reach the
//     runner's globals anyway (the first limit). The runner never calls
//     the program's objects from its own frames (invariant 11).
//   - With PythonRestricted (runner/restricted.py) the program's own code
//     reads attributes, items and iterates only through the guards, but a
//     library function it calls runs unrestricted: library code that reads
//     attributes by names the program passes is guarded only where the
//     runner replaces it (operator.attrgetter and methodcaller,
//     functools.update_wrapper and wraps, string.Formatter, str.format
//     and format_map, typing.get_origin); values a library function
//     returns, or that iterating a library's containers yields, are not
//     filtered (attribute and item reads are); vars() and dir()
//     hide what the guards refuse, so a route through them ends in a
//     KeyError or IndexError rather than a reported violation.
//
// The runner's invariants, and what breaks if one goes, open runner/guard.py.
// The tests in this package run the real /usr/bin/python3.11 on the host
// (no sandbox): the plain-Python unit tests, and a table of bypass
// attempts against the compiled runner:
//
//	go test -race -count=1 ./sandbox/pyrunner/...
package pyrunner
