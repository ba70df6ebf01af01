from collections import Counter, defaultdict, namedtuple, deque, OrderedDict
c = Counter("mississippi")
print(c.most_common(2), c["s"], sorted(c.elements())[:3])
dd = defaultdict(list)
for k, v in [("a", 1), ("b", 2), ("a", 3)]:
    dd[k].append(v)
print(dict(dd))
P = namedtuple("P", "x y")
p = P(1, y=2)
print(p, p.x + p.y, P(5, 2), dict(zip(("x", "y"), p)), p.count(1))
q = deque([1, 2, 3], maxlen=3)
q.append(4)
q.appendleft(0)
print(q, q.pop(), q.popleft())
od = OrderedDict(a=1, b=2)
od.move_to_end("a")
print(list(od))
counts = {}
for w in "a b a c a".split():
    counts[w] = counts.get(w, 0) + 1
counts["a"] += 10
print(counts)
