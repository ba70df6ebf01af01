class AppError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code
class NotFound(AppError):
    pass
def find(k):
    if k != "x":
        raise NotFound(404, f"no {k}")
    return 1
for k in ("x", "y"):
    try:
        r = find(k)
    except AppError as e:
        print("error", e.code, e, type(e).__name__, e.args)
    else:
        print("found", r)
    finally:
        print("done", k)
try:
    try:
        1 / 0
    except ZeroDivisionError as e:
        raise ValueError("wrapped") from e
except ValueError as e:
    print(repr(e), type(e.__cause__).__name__)
try:
    [][1]
except (IndexError, KeyError) as e:
    print("caught", e)
