"""A normal CPython workload, run under the compiled filter by
TestKernelWorkload: python3 workload.py FILTER, FILTER being a built-in
filter: "default", "strict", or either with "+loopback" (AF_INET and
AF_INET6 sockets allowed) or "+proxy" (TCP sockets only), and "default"
variants with a last "+noproc" (no new processes, threads only). Every
section must pass under its filter.

Each section prints "ok NAME"; any failure raises and exits non-zero.
numpy is optional (not every host has it): its section then prints
"skip numpy". Nothing here needs a network beyond loopback.
"""
import asyncio
import errno
import bz2
import concurrent.futures
import ctypes
import faulthandler
import fcntl
import hashlib
import hmac
import lzma
import mmap
import multiprocessing
import os
import resource
import secrets
import select
import selectors
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import zlib

FILTER = sys.argv[1] if len(sys.argv) > 1 else "default"
PROFILE, *VARIANTS = FILTER.split("+")
LOOPBACK = "loopback" in VARIANTS
PROXY = "proxy" in VARIANTS
# Whether the filter lets the program start processes.
PROCESSES = PROFILE == "default" and "noproc" not in VARIANTS


def ok(name):
    print("ok", name, flush=True)


def square(x):
    return x * x


def child_put(q):
    q.put(os.getpid())


def section_threads():
    lock = threading.Lock()
    total = [0]

    def work(n):
        with lock:
            total[0] += n
        return threading.get_native_id()

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(work, range(100)))
    assert total[0] == sum(range(100))
    ev = threading.Event()
    assert not ev.wait(0.01)
    cond = threading.Condition()
    with cond:
        cond.wait(0.01)
    ok("threads")


def section_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    for method in ("fork", "spawn"):
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(2) as pool:
            assert pool.map(square, range(10)) == [x * x for x in range(10)]
        q = ctx.Queue()
        p = ctx.Process(target=child_put, args=(q,))
        p.start()
        assert q.get(timeout=30) > 0
        p.join()
        assert p.exitcode == 0
    out = subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True, check=True)
    assert out.stdout.strip() == b"42"
    ok("fork")


async def echo(reader, writer):
    writer.write(await reader.readline())
    await writer.drain()
    writer.close()


async def asyncio_main(tmp):
    # TCP on loopback with the loopback and proxy variants; AF_UNIX
    # otherwise.
    if LOOPBACK or PROXY:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    else:
        path = os.path.join(tmp, "asyncio.sock")
        server = await asyncio.start_unix_server(echo, path)
        reader, writer = await asyncio.open_unix_connection(path)
    writer.write(b"ping\n")
    assert await reader.readline() == b"ping\n"
    writer.close()
    server.close()
    await server.wait_closed()
    await asyncio.sleep(0.01)
    if PROCESSES:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        assert await proc.wait() == 0


def section_asyncio():
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(asyncio_main(tmp))
    ok("asyncio")


def section_sockets():
    a, b = socket.socketpair()
    r, w = os.pipe2(os.O_CLOEXEC)
    socket.send_fds(a, [b"fd"], [r])
    msg, fds, _, _ = socket.recv_fds(b, 16, 1)
    assert msg == b"fd" and len(fds) == 1
    for fd in fds + [r, w]:
        os.close(fd)
    a.close()
    b.close()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen()
        cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        cli.connect(path)
        conn, _ = srv.accept()
        cli.sendall(b"x")
        assert conn.recv(1) == b"x"
        for s in (conn, cli, srv):
            s.close()
    sel = selectors.DefaultSelector()
    r, w = os.pipe()
    sel.register(r, selectors.EVENT_READ)
    os.write(w, b"!")
    assert sel.select(1)
    sel.close()
    p = select.poll()
    p.register(r, select.POLLIN)
    assert p.poll(100)
    assert select.select([r], [], [], 0.1)[0]
    os.close(r)
    os.close(w)
    socket.gethostname()
    ok("sockets")


def section_files():
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "t.db")
        con = sqlite3.connect(db)
        con.execute("create table t (x integer)")
        con.executemany("insert into t values (?)", [(i,) for i in range(1000)])
        con.commit()
        assert con.execute("select sum(x) from t").fetchone()[0] == sum(range(1000))
        con.close()
        mem = sqlite3.connect(":memory:")
        mem.execute("select 1")
        mem.close()
        path = os.path.join(d, "f.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(1 << 16))
            f.flush()
            os.fsync(f.fileno())
            os.fdatasync(f.fileno())
        with open(path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            fcntl.lockf(f, fcntl.LOCK_UN)
            m = mmap.mmap(f.fileno(), 0)
            m[0:4] = b"abcd"
            m.flush()
            m.close()
        shutil.copy(path, path + ".copy")
        os.rename(path + ".copy", path + ".moved")
        os.symlink(path, path + ".link")
        assert os.readlink(path + ".link") == path
        os.link(path, path + ".hard")
        os.chmod(path, 0o600)
        os.utime(path, None)
        os.truncate(path, 100)
        os.statvfs(d)
        os.mkdir(os.path.join(d, "sub"))
        assert len(os.listdir(d)) >= 5
        with tempfile.NamedTemporaryFile(dir=d) as nt:
            nt.write(b"data")
    anon = mmap.mmap(-1, 1 << 20)
    anon.resize(2 << 20)
    anon.close()
    ok("files")


def section_compress_crypto():
    data = os.urandom(4096) * 4
    assert zlib.decompress(zlib.compress(data)) == data
    assert bz2.decompress(bz2.compress(data)) == data
    assert lzma.decompress(lzma.compress(data)) == data
    hashlib.sha256(data).hexdigest()
    hashlib.blake2b(data).hexdigest()
    hmac.new(b"k", data, "sha256").digest()
    ctx = ssl.create_default_context()
    ctx.load_default_certs()
    secrets.token_hex(16)
    os.getrandom(16)
    ok("compress_crypto")


def section_signals_time():
    fired = []
    signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 0.01)
    time.sleep(0.05)
    assert fired
    signal.signal(signal.SIGUSR1, lambda *_: fired.append(2))
    os.kill(os.getpid(), signal.SIGUSR1)
    signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
    assert 2 in fired
    faulthandler.enable()
    time.monotonic()
    time.perf_counter()
    time.process_time()
    time.thread_time()
    time.localtime()
    resource.getrusage(resource.RUSAGE_SELF)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    os.sched_getaffinity(0)
    os.cpu_count()
    os.getpriority(os.PRIO_PROCESS, 0)
    os.sched_yield()
    os.uname()
    os.getcwd()
    os.getuid(), os.getgid(), os.geteuid(), os.getegid(), os.getgroups()
    libc = ctypes.CDLL(None)
    assert libc.getpid() == os.getpid()
    cb = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)
    assert cb(1) == 2
    ok("signals_time")


def section_numpy():
    try:
        import numpy as np
    except ImportError:
        print("skip numpy", flush=True)
        return
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 300))
    b = a @ a.T
    np.linalg.eigh(b)
    np.linalg.solve(b + np.eye(300) * 300, np.ones(300))
    np.fft.fft(rng.standard_normal(4096))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "a.npy")
        np.save(path, a)
        assert np.array_equal(np.load(path), a)
        mm = np.memmap(os.path.join(d, "m.dat"), dtype="float64", mode="w+", shape=(1000,))
        mm[:] = 1.0
        mm.flush()
        del mm
    ok("numpy")


def expect_errno(want, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == want, f"{fn.__name__}{args}: errno {e.errno}, want {want}"
    else:
        raise AssertionError(f"{fn.__name__}{args} succeeded, want errno {want}")


def section_denied():
    """What the filter refuses, seen from Python."""
    for family in (socket.AF_NETLINK, socket.AF_PACKET):
        expect_errno(errno.EPERM, socket.socket, family, socket.SOCK_RAW)
    libc = ctypes.CDLL(None, use_errno=True)

    def raw(name, *args):
        if getattr(libc, name)(*args) == -1:
            raise OSError(ctypes.get_errno(), name)

    raw.__name__ = "libc"
    expect_errno(errno.EPERM, raw, "unshare", 0x10000000)  # CLONE_NEWUSER
    expect_errno(errno.ENOSYS, raw, "syscall", 435, None, 0)  # clone3
    expect_errno(errno.EPERM, raw, "personality", 0x0040000)  # ADDR_NO_RANDOMIZE
    # No executable file in memory: memfd_create is refused whatever the
    # flags (MFD_CLOEXEC, MFD_NOEXEC_SEAL 8, MFD_EXEC 0x10).
    for flags in (0, os.MFD_CLOEXEC, 8, 0x10):
        expect_errno(errno.EPERM, os.memfd_create, "x", flags)
    if not LOOPBACK:
        expect_errno(errno.EPERM, socket.socket, socket.AF_INET6, socket.SOCK_DGRAM)
        expect_errno(errno.EPERM, socket.socket, socket.AF_INET, socket.SOCK_DGRAM)
    if not LOOPBACK and not PROXY:
        expect_errno(errno.EPERM, socket.socket, socket.AF_INET)
    if PROXY:
        # TCP only: no UDP (so no resolver of its own), no raw sockets, no
        # other stream protocol (SCTP, MPTCP).
        expect_errno(errno.EPERM, socket.socket, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
        expect_errno(errno.EPERM, socket.socket, socket.AF_INET, socket.SOCK_STREAM, 132)  # IPPROTO_SCTP
        expect_errno(errno.EPERM, socket.socket, socket.AF_INET, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK, socket.IPPROTO_TCP):
            pass
    if not PROCESSES:
        expect_errno(errno.EPERM, os.fork)
        expect_errno(errno.EPERM, subprocess.run, [sys.executable, "-c", "pass"])
        expect_errno(errno.EPERM, os.posix_spawn, sys.executable, [sys.executable, "-c", "pass"], os.environ)
    ok("denied")


def main():
    section_threads()
    if PROCESSES:
        section_fork()
    section_asyncio()
    section_denied()
    section_sockets()
    section_files()
    section_compress_crypto()
    section_signals_time()
    section_numpy()
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
