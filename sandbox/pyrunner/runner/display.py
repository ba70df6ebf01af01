"""Display outputs, as a notebook shows them: the value of a final bare
expression (its HTML form, then its repr), then every matplotlib figure
left open, as PNG. Everything here calls the program's objects, so it
runs as the program (_as_program: guard.py, invariant 11), and what it
raises is the program's exception."""

import _io

from .bound import _as_program, _modules, _real_import
from .jsonw import _dumps

OUTPUT_TEXT, OUTPUT_HTML, OUTPUT_PNG = "text/plain", "text/html", "image/png"


class _Outputs:
    """Outputs in order, their encoded size capped (cfg.max_output): the
    first that does not fit, and every later one, is dropped."""

    def __init__(self, limit):
        self.limit = limit
        self.size = 0
        self.items = []
        self.truncated = False

    def add(self, kind, data):
        if self.truncated:
            return False
        item = {"type": kind, "data": data}
        size = len(_dumps(item)) + 1
        if self.size + size > self.limit:
            self.truncated = True
            return False
        self.size += size
        self.items.append(item)
        return True

    def line(self, kind="outputs"):
        return {"kind": kind, "outputs": self.items, "truncated": self.truncated}


def _display(cfg, out, value, has_value):
    """Add the final expression's value (when has_value, and it is not None)
    and the open figures to out. Raises what the program's code raises."""
    try:
        if has_value and value is not None:
            _display_value(out, value)
    finally:
        _display_figures(out)


def _display_value(out, value):
    # _repr_html_ looked up on the type, as a notebook does for a class's
    # instances: a class itself (pandas.DataFrame) or a module view has none.
    if _as_program(hasattr, type(value), "_repr_html_"):
        html = _as_program(getattr, value, "_repr_html_")
        html = _as_program(html)
        if type(html) is str:
            out.add(OUTPUT_HTML, html)
    text = _as_program(repr, value)
    if type(text) is not str:  # a str subclass's methods are the program's
        text = _as_program(str.__str__, text)
    out.add(OUTPUT_TEXT, text)


def _display_figures(out):
    """Each open matplotlib figure as PNG, then close them all, so that the
    next cell starts with none. Only when the program loaded pyplot."""
    plt = _modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in list(_as_program(plt.get_fignums)):
            if out.truncated:
                break
            fig = _as_program(plt.figure, num)
            buf = _io.BytesIO()
            _as_program(fig.savefig, buf, format="png")
            png = buf.getvalue()
            b64 = _real_import("binascii").b2a_base64(png, newline=False)
            out.add(OUTPUT_PNG, b64.decode("ascii"))
    finally:
        _as_program(plt.close, "all")
