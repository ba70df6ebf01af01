class Countdown:
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        return self
    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n + 1
class Bag:
    def __init__(self):
        self.items = []
    def __len__(self):
        return len(self.items)
    def __getitem__(self, i):
        return self.items[i]
    def __contains__(self, x):
        return x in self.items
    def __add__(self, other):
        b = Bag()
        b.items = self.items + other.items
        return b
    def __bool__(self):
        return bool(self.items)
b = Bag()
b.items.append(1)
b2 = b + b
print(list(Countdown(3)), len(b2), b2[1], 1 in b, bool(Bag()), [x for x in b2])
it = iter([1, 2])
print(next(it), next(it), next(it, "end"))
