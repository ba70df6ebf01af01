import re
text = "Call 555-1234 or 555-9876 today; email a.b@example.com"
print(re.findall(r"\d{3}-\d{4}", text), re.sub(r"\d", "#", "a1b22"), re.split(r"[;,]\s*", "a, b;c"))
m = re.search(r"(?P<user>[\w.]+)@(?P<host>[\w.]+)", text)
print(m.group("user"), m["host"], m.span(), m.groupdict())
pat = re.compile(r"^(\w+)\s(\w+)$", re.I)
print(pat.match("Hello World").groups(), bool(pat.match("x")), [m.group(0) for m in re.finditer(r"o\w", "foo bor")])
