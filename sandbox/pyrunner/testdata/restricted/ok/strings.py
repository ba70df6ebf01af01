s = "Hello, World"
print(s.lower(), s.upper(), s.split(", "), s.replace("World", "nsbox"), s[::-1], s[1:5], len(s))
print("-".join(["a", "b", "c"]), "  pad  ".strip(), "x".center(5, "*"), s.startswith("He"), s.find("o"), s.count("l"))
print("abc".title(), "A1".isalnum(), "42".zfill(5), "a,b,,c".split(","), "%s=%d" % ("n", 3), "%(a)s" % {"a": 1})
