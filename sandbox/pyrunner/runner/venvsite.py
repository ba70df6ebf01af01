"""site's work for nsbox's venv, done without site (the interpreter runs
with -S: site imports os and reads every .pth file, on every run).
tests/site_test.go checks that the program sees what the real site.main()
gives the same interpreter in the same root."""

import _sitebuiltins
import builtins
import posix
import sys

from .bound import _STDLIB, _modules, _real_import
from .paths import _abspath


def _site():
    """What site.main() does for an nsbox root, which has a venv (/venv,
    include-system-site-packages = false, no .pth file, no sitecustomize):
    the venv's prefix and site-packages, and the builtins site adds (exit,
    quit, help, copyright, credits, license). Anything else, or a layout
    this does not recognise, gets the real site.main(). sys.flags.no_site
    is 1 either way."""
    if not _venv_site():
        _real_import("site").main()
        return
    eof = "Ctrl-D (i.e. EOF)"
    builtins.quit = _sitebuiltins.Quitter("quit", eof)
    builtins.exit = _sitebuiltins.Quitter("exit", eof)
    builtins.copyright = _printer("copyright", sys.copyright, ())
    builtins.credits = _printer("credits", """\
    Thanks to CWI, CNRI, BeOpen.com, Zope Corporation and a cast of thousands
    for supporting Python development.  See www.python.org for more information.""", ())
    builtins.license = _printer(
        "license", "See https://www.python.org/psf/license/",
        [d + "/" + f for d in (_STDLIB + "/..", _STDLIB, ".")
         for f in ("LICENSE.txt", "LICENSE")])
    builtins.help = _sitebuiltins._Helper()


def _printer(name, data, filenames):
    """A _sitebuiltins._Printer as its constructor would make it; the
    constructor imports os for os.path.join."""
    p = _sitebuiltins._Printer.__new__(_sitebuiltins._Printer)
    p._Printer__name, p._Printer__data = name, data
    p._Printer__lines, p._Printer__filenames = None, list(filenames)
    return p


def _isdir(p):
    try:
        return posix.stat(p).st_mode & 0o170000 == 0o040000
    except OSError:
        return False


def _venv_site():
    """Set up the venv as site.venv() would; False (nothing changed) if the
    interpreter is not in a venv of the shape nsbox builds."""
    exe_dir = _abspath(sys.executable).rpartition("/")[0]
    prefix = exe_dir.rpartition("/")[0]
    try:
        posix.stat(exe_dir + "/pyvenv.cfg")
        return False  # site would read this one first
    except OSError:
        pass
    try:
        with open(prefix + "/pyvenv.cfg", encoding="utf-8") as f:
            conf = f.read()
    except OSError:
        return False
    system_site, home = "true", None
    for line in conf.splitlines():
        key, eq, value = line.partition("=")
        if not eq:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "include-system-site-packages":
            system_site = value.lower()
        elif key == "home":
            home = value
    if system_site == "true":
        return False
    ver = "python%d.%d" % sys.version_info[:2]
    site = prefix + "/lib/" + ver + "/site-packages"
    # Debian's site also looks in these; nsbox's roots have none of them.
    for d in (prefix + "/local/lib/" + ver + "/dist-packages",
              prefix + "/lib/python3/dist-packages",
              prefix + "/lib/" + ver + "/dist-packages"):
        if _isdir(d):
            return False
    try:
        names = posix.listdir(site)
    except OSError:
        return False
    if any(n.endswith(".pth") and not n.startswith(".") for n in names):
        return False  # .pth files are site's to run
    sys.prefix = sys.exec_prefix = prefix
    sys._home = home
    if site not in sys.path:
        sys.path.append(site)
    # site imports sitecustomize when there is one: leave that to site too.
    if _modules["_frozen_importlib_external"].PathFinder.find_spec("sitecustomize") is not None:
        sys.path.remove(site)
        sys.prefix, sys.exec_prefix = sys.base_prefix, sys.base_exec_prefix
        return False
    return True
