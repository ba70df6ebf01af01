package pyrunner

import (
	"slices"
)

//go:generate go run ./internal/genallow -repo ../..

// The shipped lists, as data for the policies' TOML (strict, default,
// datasci, datasci-min, web). Top-level module names of CPython 3.11 on Linux.

// StrictAllow is a safe standard-library subset for code nobody has read:
// computation, text, data formats, dates, hashing and compression. Files
// are reached only through open/io/gzip/bz2/lzma, whose writes the "open"
// denial confines.
//
// Left out, and why:
//   - os, posix, sys, builtins: the process, every loaded module
//     (sys.modules), the real builtins and __import__;
//   - subprocess, pty, multiprocessing, concurrent: processes;
//   - socket, ssl, select, selectors, asyncio, http, urllib: the network
//     (asyncio also spawns processes);
//   - ctypes: raw memory and native code;
//   - importlib, pkgutil, runpy, zipimport, imp: import any module by a
//     computed name or path, around the allowlist;
//   - pickle, shelve, marshal: unpickling calls any importable callable;
//     marshal makes code objects;
//   - types, code, codeop, dis, ast: construct code and functions from
//     parts (crafted bytecode corrupts memory) or compile strings;
//   - inspect, traceback, gc, weakref, tracemalloc, faulthandler, atexit:
//     frames, referrers and every object, so every module's globals;
//   - threading, signal, pdb, bdb, trace, profile, cProfile, timeit,
//     doctest, unittest: hand frames to callbacks (settrace, signal
//     handlers) or run code strings with the real builtins;
//   - shutil, pathlib, tempfile, glob, fileinput, logging: the filesystem
//     beyond open (logging.config also imports by name and listens on a
//     socket).
var StrictAllow = []string{
	"abc", "array", "base64", "binascii", "bisect", "bz2", "calendar",
	"cmath", "collections", "colorsys", "contextlib", "copy", "csv",
	"dataclasses", "datetime", "decimal", "difflib", "enum", "fractions",
	"functools", "graphlib", "gzip", "hashlib", "heapq", "hmac", "html",
	"io", "itertools", "json", "lzma", "math", "numbers", "operator",
	"pprint", "random", "re", "reprlib", "secrets", "statistics", "string",
	"struct", "textwrap", "time", "typing", "unicodedata", "uuid",
	"warnings", "zlib", "zoneinfo",
}

// DefaultDeny are the standard-library modules DefaultAllow leaves out,
// with the reason; every other public module of sys.stdlib_module_names
// (3.11) is in DefaultAllow. Private modules (_socket, _posixsubprocess,
// _ctypes, ...) are never listed: they are the back doors of the public
// ones, and allowed modules still import them internally.
var DefaultDeny = map[string]string{
	// Process control. os stays allowed (most libraries need it); its
	// process calls are denied as events (DefaultDenyEvents).
	"subprocess":      "process control",
	"pty":             "process control (forks a child on a terminal)",
	"pipes":           "process control (shell pipelines)",
	"posix":           "process control (the raw os module, around the policy's view of os)",
	"multiprocessing": "process control",
	"ensurepip":       "process control (runs pip)",
	"venv":            "process control (creates environments, runs pip)",
	"distutils":       "process control (spawns compilers)",
	// Native code.
	"ctypes": "raw memory and native code",
	// Sockets and network clients and servers.
	"socket":       "sockets",
	"ssl":          "sockets",
	"socketserver": "sockets",
	"asynchat":     "sockets",
	"asyncore":     "sockets",
	"ftplib":       "network client",
	"imaplib":      "network client",
	"nntplib":      "network client",
	"poplib":       "network client",
	"smtplib":      "network client",
	"smtpd":        "network server",
	"telnetlib":    "network client",
	"xmlrpc":       "network client and server",
	"nis":          "network directory service",
	"webbrowser":   "launches a browser process",
	"antigravity":  "launches a browser process",
	// Ways around the allowlist itself.
	"builtins":  "the real builtins: __import__, and the builtins a policy denies",
	"pickle":    "unpickling imports any module and calls any callable",
	"shelve":    "pickle underneath",
	"pkgutil":   "imports modules by computed name (resolve_name)",
	"pydoc":     "imports modules by computed name (locate)",
	"runpy":     "runs modules and files with the real builtins",
	"zipimport": "imports code from archives with the real builtins",
	"imp":       "loads modules from any path (load_source)",
	// Cannot work in a sandbox.
	"tkinter":    "needs a display",
	"turtle":     "needs a display",
	"turtledemo": "needs a display",
	"idlelib":    "needs a display",
	"msilib":     "Windows only",
	"msvcrt":     "Windows only",
	"nt":         "Windows only",
	"winreg":     "Windows only",
	"winsound":   "Windows only",
}

// DefaultAllow is most of the standard library: sys.stdlib_module_names of
// CPython 3.11 without private modules and without DefaultDeny (a test
// checks it against the interpreter). It includes os, sys and importlib:
// the default policy does not set strict_attrs, so its Python layer keeps
// out modules that are not loaded yet and records what the program asks
// for; the OS sandbox and the denied events do the rest.
var DefaultAllow = []string{
	"abc", "aifc", "argparse", "array", "ast", "asyncio", "atexit", "audioop",
	"base64", "bdb", "binascii", "bisect", "bz2", "cProfile", "calendar", "cgi",
	"cgitb", "chunk", "cmath", "cmd", "code", "codecs", "codeop", "collections",
	"colorsys", "compileall", "concurrent", "configparser", "contextlib",
	"contextvars", "copy", "copyreg", "crypt", "csv", "curses", "dataclasses",
	"datetime", "dbm", "decimal", "difflib", "dis", "doctest", "email",
	"encodings", "enum", "errno", "faulthandler", "fcntl", "filecmp",
	"fileinput", "fnmatch", "fractions", "functools", "gc", "genericpath",
	"getopt", "getpass", "gettext", "glob", "graphlib", "grp", "gzip",
	"hashlib", "heapq", "hmac", "html", "http", "imghdr", "importlib",
	"inspect", "io", "ipaddress", "itertools", "json", "keyword", "lib2to3",
	"linecache", "locale", "logging", "lzma", "mailbox", "mailcap", "marshal",
	"math", "mimetypes", "mmap", "modulefinder", "netrc", "ntpath",
	"nturl2path", "numbers", "opcode", "operator", "optparse", "os",
	"ossaudiodev", "pathlib", "pdb", "pickletools", "platform", "plistlib",
	"posixpath", "pprint", "profile", "pstats", "pwd", "py_compile", "pyclbr",
	"pydoc_data", "pyexpat", "queue", "quopri", "random", "re", "readline",
	"reprlib", "resource", "rlcompleter", "sched", "secrets", "select",
	"selectors", "shlex", "shutil", "signal", "site", "sndhdr", "spwd",
	"sqlite3", "sre_compile", "sre_constants", "sre_parse", "stat",
	"statistics", "string", "stringprep", "struct", "sunau", "symtable", "sys",
	"sysconfig", "syslog", "tabnanny", "tarfile", "tempfile", "termios",
	"textwrap", "this", "threading", "time", "timeit", "token", "tokenize",
	"tomllib", "trace", "traceback", "tracemalloc", "tty", "types", "typing",
	"unicodedata", "unittest", "urllib", "uu", "uuid", "warnings", "wave",
	"weakref", "wsgiref", "xdrlib", "xml", "zipapp", "zipfile", "zlib",
	"zoneinfo",
}

// The package lists of the roots with a lock (DatasciPackages,
// DatasciMinPackages, WebPackages) are generated from the locks'
// "# imports:" lines into allowlists_gen.go, as are the imports_add blocks
// of the policies that name those roots. The packages' own imports
// (pandas importing os, matplotlib importing subprocess) are internal and
// pass whatever the allowlist says.

// DatasciAllow is DefaultAllow plus DatasciPackages, sorted.
var DatasciAllow = merged(DefaultAllow, DatasciPackages)

// DatasciMinAllow is DefaultAllow plus DatasciMinPackages, sorted.
var DatasciMinAllow = merged(DefaultAllow, DatasciMinPackages)

// WebStdlib are the standard-library modules the web policy allows on top
// of DefaultAllow: a program that sets a socket timeout, catches
// socket.timeout or builds an SSL context imports them itself. Under the
// web policy's proxy the runner refuses every socket route but the proxy
// (runner/network.py), and the kernel layer every socket but TCP.
// socketserver, ftplib, smtplib and the other clients of DefaultDeny stay
// refused: their protocols do not pass an HTTP proxy.
var WebStdlib = []string{"socket", "ssl"}

// WebAllow is DefaultAllow plus WebStdlib and WebPackages, sorted.
var WebAllow = merged(DefaultAllow, WebStdlib, WebPackages)

// StrictDenyBuiltins: the getattr family (computed attribute names get
// around the static underscore check), everything that runs or compiles a
// string, the namespace dicts, and writes outside the writable dirs.
var StrictDenyBuiltins = []string{
	"eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
	"vars", "globals", "locals", "open",
}

// DefaultDenyBuiltins: writes outside the writable dirs only (the root is
// read-only anyway; this names the culprit in the report).
var DefaultDenyBuiltins = []string{"open"}

// StrictDenyEvents: processes, sockets, native code, hand-made code
// objects (crafted bytecode), and tracing (frames to a callback). None is
// raised by StrictAllow's modules in normal use.
var StrictDenyEvents = append(slices.Clone(ProcessEvents),
	"os.kill", "os.killpg",
	"socket.__new__", "socket.connect", "socket.bind",
	"ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
	"code.__new__", "sys.settrace", "sys.setprofile",
	"sqlite3.enable_load_extension", "sqlite3.load_extension",
)

// ProcessEvents are the audit events that start a new process, first in
// both deny lists. A policy that denies every one runs no other process;
// the audit hook alone cannot hold that (a fresh built-in
// _posixsubprocess, made through importlib's BuiltinImporter, forks with
// no event), so the planner then has the kernel refuse it too
// (seccomp.NoProcSuffix).
var ProcessEvents = []string{
	"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
	"os.fork", "os.forkpty",
}

// DefaultDenyEvents: process creation and SQLite extensions (native
// code). Not ctypes.dlopen: importing ctypes raises it (ctypes opens the
// interpreter itself), and numpy imports ctypes. No socket event: the
// default seccomp profile refuses every socket but AF_UNIX at socket(2),
// where every route to TCP starts (connect, listen without bind, a TCP
// Fast Open sendmsg), and the events cannot tell families apart, so
// socket.connect, socket.bind and socket.sendto would refuse only the
// AF_UNIX sockets the kernel allows, and socket.__new__ asyncio's
// socketpair.
var DefaultDenyEvents = append(slices.Clone(ProcessEvents),
	"sqlite3.enable_load_extension", "sqlite3.load_extension",
)

func merged(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
