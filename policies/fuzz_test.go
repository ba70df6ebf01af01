package policies

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzParse checks that Parse never panics, that every rejection is an
// *Error naming the file, that every accepted policy re-validates and
// survives an encode/parse round trip, and that every key the TOML parser
// reports can be located (error lines depend on it). The round trip goes
// through Policy.TOML, the encoder of "nsbox policy show --resolved".
func FuzzParse(f *testing.F) {
	for _, name := range BuiltinNames() {
		data, err := builtinFS.ReadFile(name + ".toml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base))
	f.Add([]byte(base + "[env]\nTZ = \"UTC\"\n\"A B\" = \"x\"\n"))
	f.Add([]byte("limits = { timeout = \"1s\",\n output_limit = 2048 }\n[[aot]]\n'k' . \"\\u0041\" = [1, {a = '''x'''}]\n"))
	f.Add([]byte("description = \"\"\"\n[limits]\ntimeout = 1\n\"\"\"\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.toml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "f.toml" || e.Msg == "" {
				t.Fatalf("Parse error %v (%T) is not a complete *Error", err, err)
			}
		} else {
			checkAccepted(t, p)
		}

		var tree map[string]any
		md, err := toml.Decode(string(data), &tree)
		if err != nil {
			return
		}
		lines := keyLines(string(data))
		n := strings.Count(string(data), "\n") + 1
		for _, k := range md.Keys() {
			if l := lines[k.String()]; l < 1 || l > n {
				t.Fatalf("key %s located at line %d of %d", k, l, n)
			}
		}
	})
}

func checkAccepted(t *testing.T, p *Policy) {
	t.Helper()
	if err := p.validate("f.toml", func(string) int { return 0 }); err != nil {
		t.Fatalf("accepted policy does not re-validate: %v", err)
	}
	enc := p.TOML()
	q, err := Parse("f.toml", enc)
	if err != nil {
		t.Fatalf("re-parse of encoded policy: %v\n%s", err, enc)
	}
	// The hash is of the text, which re-encoding changes; the values must not.
	q.SHA256 = p.SHA256
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, q)
	}
}
