import functools
import operator
print(functools.reduce(operator.add, range(5)), functools.reduce(lambda a, b: a * b, [1, 2, 3, 4]))
@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
print(fib(60), fib.cache_info().hits > 0)
base2 = functools.partial(int, base=2)
print(base2("1010"), sorted(["bb", "a", "ccc"], key=functools.cmp_to_key(lambda a, b: len(a) - len(b))))
print(list(map(operator.itemgetter(1), [(1, "x"), (2, "y")])), operator.attrgetter("real")(3), operator.methodcaller("upper")("q"))
