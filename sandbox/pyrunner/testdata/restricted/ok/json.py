import json
data = {"name": "nsbox", "tags": ["a", "b"], "n": 3, "ok": True, "none": None, "f": 1.5}
s = json.dumps(data, sort_keys=True)
print(s)
back = json.loads(s)
print(back == data, json.dumps([1, {"a": [2]}], indent=1).count("\n"), json.loads("[1, 2.5, \"x\"]"))
try:
    json.loads("{bad")
except json.JSONDecodeError as e:
    print("bad json at", e.pos)
