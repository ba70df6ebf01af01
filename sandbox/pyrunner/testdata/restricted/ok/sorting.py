people = [("ann", 31), ("bob", 25), ("cid", 31), ("dee", 22)]
print(sorted(people, key=lambda p: (-p[1], p[0])))
print(sorted(people, key=lambda p: p[1], reverse=True)[0], min(people, key=lambda p: p[1]), max("abc", key=ord))
words = ["banana", "Apple", "cherry"]
words.sort(key=str.lower)
print(words, sorted("hello"), list(reversed([1, 2, 3])))
