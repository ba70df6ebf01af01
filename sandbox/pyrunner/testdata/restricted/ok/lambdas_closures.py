def make_adder(n):
    def add(x):
        return x + n
    return add
def make_counter():
    count = 0
    def inc():
        nonlocal count
        count += 1
        return count
    return inc
add5 = make_adder(5)
inc = make_counter()
inc(); inc()
fs = [lambda x, i=i: x * i for i in range(3)]
print(add5(1), inc(), [f(10) for f in fs], (lambda *a, **k: (a, k))(1, 2, z=3), sorted([3, 1, 2], key=lambda v: -v))
