name, n, pi = "nsbox", 3, 3.14159
print(f"{name!r} has {n:03d} items, pi={pi:.2f}, {n * 2 = }")
w = 8
print(f"[{name:>{w}}] [{name:<{w}}] [{n:^5}] {1234567:,} {0.25:%} {255:x} {255:#b}")
print("{} and {}".format("a", "b"), "{0}{1}{0}".format("x", "y"), "{k}".format(k=5), "{:>4}".format(7), "{a}-{b}".format_map({"a": 1, "b": 2}))
