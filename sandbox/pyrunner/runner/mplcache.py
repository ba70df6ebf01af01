"""Matplotlib's font cache, seeded from the root before anything imports
matplotlib. Go's pyrunner.MatplotlibCacheDir says why: the root carries
the cache its builder made, read-only; matplotlib wants it in a writable
$MPLCONFIGDIR, and without it builds one, probing fontconfig with a
subprocess the audit hook refuses."""

import posix

from .paths import _fsdecode

# Go's pyrunner.MatplotlibCacheDir, which a Go test keeps equal to this one.
MPL_CACHE_DIR = "/venv/share/nsbox/matplotlib"

_S_IFMT, _S_IFREG = 0o170000, 0o100000


def _seed_matplotlib():
    """Copy the root's cache files into $MPLCONFIGDIR, creating it, when it
    is set and absolute and the root has them. Nothing else is touched: a
    file already there is kept, and without the variable or the files
    nothing happens. A failure (no space) leaves matplotlib to build its
    cache as it would without this, and to say so itself."""
    dst = _fsdecode(posix.environ.get(b"MPLCONFIGDIR", b""))
    if not dst.startswith("/"):
        return
    try:
        names = sorted(posix.listdir(MPL_CACHE_DIR))
    except OSError:
        return  # a root without matplotlib, or built before its cache
    if not names or not _makedirs(dst):
        return
    for name in names:
        _copy(MPL_CACHE_DIR + "/" + name, dst.rstrip("/") + "/" + name)


def _makedirs(d):
    """mkdir -p d, as matplotlib would make it (mode 0o777 less the
    umask); False when it is not a directory afterwards."""
    path = ""
    for part in d.split("/"):
        if not part:
            continue
        path += "/" + part
        try:
            posix.mkdir(path, 0o777)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        return posix.stat(d).st_mode & _S_IFMT == 0o040000
    except OSError:
        return False


def _copy(src, dst):
    """Copy the regular file src to dst, a new file; a partial copy is
    removed."""
    try:
        rfd = posix.open(src, posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return
    try:
        if posix.fstat(rfd).st_mode & _S_IFMT != _S_IFREG:
            return
        try:
            wfd = posix.open(dst, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL |
                             posix.O_NOFOLLOW | posix.O_CLOEXEC, 0o666)
        except OSError:
            return  # already there, or nowhere to write: left as it is
        done = False
        try:
            while True:
                data = posix.read(rfd, 1 << 16)
                if not data:
                    break
                while data:
                    data = data[posix.write(wfd, data):]
            done = True
        except OSError:
            pass
        finally:
            posix.close(wfd)
            if not done:
                try:
                    posix.unlink(dst)
                except OSError:
                    pass
    finally:
        posix.close(rfd)
