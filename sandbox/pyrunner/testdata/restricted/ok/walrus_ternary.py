data = [1, 5, 12, 3]
if (n := len(data)) > 3:
    print("long", n)
print([y for x in data if (y := x * 2) > 5], "big" if max(data) > 10 else "small")
assert n == 4, "n must be 4"
