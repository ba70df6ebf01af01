a, b = 1, 2
a, b = b, a
first, *rest = [1, 2, 3, 4]
*init, last = "abcd"
(x, y), z = (1, 2), 3
head, *mid, tail = range(5)
print(a, b, first, rest, init, last, x, y, z, mid)
def f(a, b, *args, c=0, **kw):
    return a, b, args, c, kw
args = [1, 2, 3]
kw = {"c": 4, "d": 5}
print(f(*args, **kw), [*args, *"xy"], {**kw, "e": 6}, max(*args))
for i, (k, v) in enumerate({"a": 1, "b": 2}.items()):
    print(i, k, v)
