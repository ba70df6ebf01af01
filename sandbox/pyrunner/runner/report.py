"""The report channel: JSON lines on a private fd (the Go package pyrunner
documents the protocol and parses it)."""

import posix

from .bound import _write
from .config import _fail

# The most each field of a cell's exception takes in a report line, in
# encoded bytes: Go's line bound leaves room for this much (session.go's
# maxExceptionField, which a Go test keeps equal).
EXCEPTION_MAX = 64 << 10

_ESC = {i: "\\u%04x" % i for i in (*range(32), 0x7f)}
_ESC.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n",
             ord("\r"): "\\r", ord("\t"): "\\t", ord("\b"): "\\b",
             ord("\f"): "\\f"})


def _esc(s):
    """s as a JSON string of ASCII characters (json's
    encode_basestring_ascii, without importing json)."""
    s = s.translate(_ESC)
    if not s.isascii():
        s = "".join(c if c < "\x80" else _uesc(ord(c)) for c in s)
    return '"' + s + '"'


def _uesc(n):
    if n < 0x10000:
        return "\\u%04x" % n
    n -= 0x10000
    return "\\u%04x\\u%04x" % (0xd800 | (n >> 10), 0xdc00 | (n & 0x3ff))


class _Report:
    """The report channel: a private fd, written with posix.write bound at
    start-up. Runtime lines are de-duplicated and capped (max_lines, from
    the config) so a loop cannot fill the pipe."""

    def __init__(self, fd, max_lines):
        try:
            st = posix.fstat(fd)
            posix.set_inheritable(fd, False)  # no child process gets it
        except OSError as e:
            _fail("report_fd %d: %s" % (fd, e))
        self.fd = fd
        self.ident = (st.st_dev, st.st_ino)
        self.max_lines = max_lines
        self.seen = set()
        self.runtime = 0

    def line(self, pairs):
        text = ",".join(
            _esc(k) + ":" + (_esc(v) if isinstance(v, str) else str(int(v)))
            for k, v in pairs)
        self.send("{" + text + "}")

    def send(self, text):
        """Write one line, text (ASCII JSON), whole: a write a signal
        interrupts part way is resumed where it stopped."""
        data = memoryview((text + "\n").encode("ascii"))
        try:
            while data:
                data = data[_write(self.fd, data):]
        except OSError:
            pass  # telemetry: a closed reader must not break the program

    def violation(self, kind, name, line, col, detail):
        self.line((("kind", kind), ("name", name), ("line", line),
                   ("col", col), ("detail", detail)))

    def restart(self):
        """A new cell: its runtime lines are de-duplicated and capped anew."""
        self.seen = set()
        self.runtime = 0

    def full(self):
        """Whether the runtime lines reached the cap."""
        return self.runtime >= self.max_lines

    def runtime_violation(self, kind, name, line, col, detail):
        key = (kind, name, line, col)
        if key in self.seen or self.full():
            return
        self.seen.add(key)
        self.runtime += 1
        self.violation(kind, name, line, col, detail)
