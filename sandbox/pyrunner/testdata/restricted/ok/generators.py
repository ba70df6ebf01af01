def fib(n):
    a, b = 0, 1
    for _ in range(n):
        yield a
        a, b = b, a + b
def chain(*its):
    for it in its:
        yield from it
g = fib(10)
print(list(g), next(fib(3)), list(chain([1, 2], (3,), "ab")))
def counter():
    total = 0
    while True:
        x = yield total
        if x is None:
            return total
        total += x
c = counter()
next(c)
print(c.send(5), c.send(7))
gen = (i * 2 for i in range(4))
print(sum(gen), list(zip(fib(4), "abcd")))
