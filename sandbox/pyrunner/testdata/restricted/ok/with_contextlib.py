import contextlib
class Tag:
    def __init__(self, name):
        self.name = name
    def __enter__(self):
        print("<" + self.name + ">")
        return self
    def __exit__(self, exc_type, exc, tb):
        print("</" + self.name + ">")
        return exc_type is KeyError
@contextlib.contextmanager
def section(title):
    print("begin", title)
    try:
        yield title.upper()
    finally:
        print("end", title)
with Tag("a") as t, section("s") as s:
    print("inside", t.name, s)
with Tag("b"):
    raise KeyError("swallowed")
with contextlib.suppress(ZeroDivisionError):
    1 / 0
print("after")
