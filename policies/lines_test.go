package policies

import (
	"testing"

	"github.com/BurntSushi/toml"
)

func TestKeyLines(t *testing.T) {
	const doc = `# [limits] timeout = 1 in a comment
a = "x # [b] = \" still a string"
'lit.key' = 'c:\path'
[ "quoted . table" . 'x' ]   # header comment
  k1 = """
t = 1
[not.a.table]
"""""
k2 = '''
u = 2 '''
"esc\u0041\e" = 1
[t]
arr = [
  { in = 1, deep = { er = 2 } },  # ]
  [ "]", { z = 3 } ],
]
inl = { x = 1,
  y = [1,
       2],
}
d1 . d2 = 1979-05-27 07:32:00Z
[[aot]]
n = 1
[[aot]]
m = 2
`
	want := map[string]int{
		"a":                     2,
		`"lit.key"`:             3,
		`"quoted . table"`:      4,
		`"quoted . table".x`:    4,
		`"quoted . table".x.k1`: 5,
		`"quoted . table".x.k2`: 9,
		toml.Key{"quoted . table", "x", "escA\x1b"}.String(): 11,
		"t":             12,
		"t.arr":         13,
		"t.arr.in":      14,
		"t.arr.deep":    14,
		"t.arr.deep.er": 14,
		"t.arr.z":       15,
		"t.inl":         17,
		"t.inl.x":       17,
		"t.inl.y":       18,
		"t.d1":          21,
		"t.d1.d2":       21,
		"aot":           22,
		"aot.n":         23,
		"aot.m":         25,
	}
	var tree map[string]any
	md, err := toml.Decode(doc, &tree)
	if err != nil {
		t.Fatal(err)
	}
	got := keyLines(doc)
	for k, line := range want {
		if got[k] != line {
			t.Errorf("line of %s = %d, want %d", k, got[k], line)
		}
	}
	for _, k := range md.Keys() {
		if got[k.String()] == 0 {
			t.Errorf("toml key %s not located", k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %s at line %d", k, got[k])
		}
	}
}

func TestKeyLinesCRLF(t *testing.T) {
	got := keyLines("[limits]\r\ntimeout = \"1s\"\r\n\r\nx = 1\r\n")
	if got["limits.timeout"] != 2 || got["limits.x"] != 4 {
		t.Errorf("CRLF lines = %v", got)
	}
}
