"""Network allowlist mode's figures for bench.py: what the mode costs a
run, and what a connection through nsbox's proxy costs.

A plain HTTP server in this process, on the host's 127.0.0.1, serves
/bytes?n=N. Rows, each paired with bare python3.11 running the same code
against the same server directly (no proxy, no sandbox):

- "nsbox allowlist" (`-c pass`): default with [network] mode =
  "allowlist" and the server allowed; against "nsbox default" it is the
  mode's cost per run (the proxy's socket, its serving, the filter
  variant);
- workload "download": one 1 MiB download with urllib;
- workload "download20": twenty 1 MiB downloads, one after another, each
  its own connection; (+ms of download20 - +ms of download) / 19 is the
  proxy's cost per connection.
"""

import http.server
import os
import threading

MIB = 1 << 20
DOWNLOADS = 20


def download_code(port, n):
    return ("import urllib.request\n"
            "for _ in range(%d):\n"
            "    with urllib.request.urlopen('http://127.0.0.1:%d/bytes?n=%d') as r:\n"
            "        assert len(r.read()) == %d\n" % (n, port, MIB, MIB))


class _Bytes(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        try:
            n = int(self.path.split("n=", 1)[1])
        except (IndexError, ValueError):
            n = 0
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        chunk = b"\0" * 65536
        while n > 0:
            k = min(n, len(chunk))
            self.wfile.write(chunk[:k])
            n -= k

    def log_message(self, *args):
        pass


def start_server():
    """The /bytes server on 127.0.0.1, in a daemon thread; its port."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bytes)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


def network_methods(M, ns, tmp, bare):
    """The rows above; the server runs until the harness exits."""
    port = start_server()
    pol = os.path.join(tmp, "allowlist.toml")
    with open(pol, "w") as f:
        f.write('extends = "default"\n\n[network]\nmode = "allowlist"\nallow = ["127.0.0.1:%d"]\n'
                'max_connections = 8\nmax_bytes = "256MiB"\n' % port)
    note = "default, network allowlist mode"
    rows = [M("nsbox allowlist", "network (per run)", ns(pol), "pass", base=bare("pass"),
              note=note + "; the program makes no connection")]
    for wl, n in (("download", 1), ("download20", DOWNLOADS)):
        code = download_code(port, n)
        B = bare(code)
        rows += [M("bare python3.11, direct", "", B["cmd"], wl, base=B, note="no proxy, no sandbox"),
                 M("nsbox allowlist", "network (per connection)", ns(pol, code), wl, base=B,
                   note=note + "; through the proxy")]
    return rows


def costs(oh, ohw):
    """The mode's cost per run and per connection, from the rows' +ms."""
    out = {}
    a, d = oh("nsbox allowlist"), oh("nsbox default")
    if None not in (a, d):
        out["network allowlist mode, per run"] = {"ms": a - d, "how": "allowlist - default (`-c pass`)"}
    one, many = ohw("nsbox allowlist", "download"), ohw("nsbox allowlist", "download20")
    if None not in (one, many):
        out["network allowlist mode, per 1 MiB connection through the proxy"] = {
            "ms": (many - one) / (DOWNLOADS - 1), "how": "(+ms 20 downloads - +ms 1 download) / 19"}
    return out


TITLES = {
    "download": "download: one 1 MiB HTTP download (urllib)",
    "download20": "download20: twenty 1 MiB HTTP downloads, one connection each",
}
