d = {"a": 1, "b": 2}
d["c"] = 3
d.update(d=4)
del d["a"]
print(d, d.get("z", 0), list(d.keys()), "b" in d, d.pop("b"), d.setdefault("e", 5), d | {"f": 6})
s1, s2 = {1, 2, 3}, {2, 3, 4}
print(s1 & s2, s1 | s2, s1 - s2, s1 ^ s2, s1 <= {1, 2, 3, 4}, frozenset([1, 1, 2]))
m = [[0] * 3 for _ in range(2)]
m[1][2] = 7
m[0][0] += 5
lst = [1, 2, 3]
lst[1:2] = [9, 9]
lst.extend([4])
lst.insert(0, 0)
lst.remove(9)
print(m, lst, lst.index(3), lst.count(9))
