sq = [i * i for i in range(6)]
ev = {i for i in sq if i % 2 == 0}
d = {k: v for k, v in zip("abc", range(3))}
g = sum(x for x in range(10) if x % 3 == 0)
nested = [(i, j) for i in range(3) for j in range(i)]
print(sq, sorted(ev), d, g, nested)
print([[c for c in row] for row in ["ab", "cd"]], {k: [v] * 2 for k, v in d.items()})
