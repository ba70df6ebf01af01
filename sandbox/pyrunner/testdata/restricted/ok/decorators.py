import functools
def log(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        print("call", fn.__name__, args)
        return fn(*args, **kwargs)
    return wrapper
def repeat(n):
    def deco(fn):
        def wrapped(*a):
            return [fn(*a) for _ in range(n)]
        return wrapped
    return deco
@log
def square(x):
    """Square it."""
    return x * x
@repeat(2)
def hi(name):
    return "hi " + name
class Greeter:
    @staticmethod
    def s():
        return "static"
    @classmethod
    def c(cls):
        return cls.__name__
print(square(4), square.__name__, square.__doc__, hi("x"), Greeter.s(), Greeter.c())
