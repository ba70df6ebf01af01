import itertools
print(list(itertools.permutations("abc", 2))[:3], list(itertools.combinations(range(4), 2)))
print(list(itertools.product([0, 1], repeat=2)), list(itertools.islice(itertools.count(5, 2), 3)))
print([(k, list(g)) for k, g in itertools.groupby("aabbbc")], list(itertools.accumulate([1, 2, 3, 4])))
print(list(itertools.chain.from_iterable([[1], [2, 3]])), list(itertools.zip_longest("ab", "x", fillvalue="-")), list(itertools.starmap(pow, [(2, 3)])))
