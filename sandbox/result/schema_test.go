package result

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The documentation lives at the repository root; tests run in the package
// directory.
const (
	schemaPath = "../../docs/result.schema.json"
	docPath    = "../../docs/result-schema.md"
)

// jsonSchema is the part of a JSON Schema object these tests compare.
type jsonSchema struct {
	Properties           map[string]jsonSchema `json:"properties"`
	Required             []string              `json:"required"`
	AdditionalProperties *bool                 `json:"additionalProperties"`
	Description          string                `json:"description"`
	Type                 any                   `json:"type"`
	Enum                 []string              `json:"enum"`
	Const                any                   `json:"const"`
}

// jsonFields returns the JSON names of t's fields, all of them and those
// without omitempty.
func jsonFields(t reflect.Type) (all, required []string) {
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		all = append(all, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
	}
	return all, required
}

func loadSchema(t *testing.T) jsonSchema {
	t.Helper()
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatalf("read schema: %v", err)
	}
	var s jsonSchema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("parse %s: %v", schemaPath, err)
	}
	return s
}

// checkObject compares one object schema with the Go struct it describes.
func checkObject(t *testing.T, where string, s jsonSchema, typ reflect.Type) {
	t.Helper()
	all, required := jsonFields(typ)
	var props []string
	for name, p := range s.Properties {
		props = append(props, name)
		if p.Description == "" {
			t.Errorf("%s: property %q has no description", where, name)
		}
	}
	slices.Sort(props)
	slices.Sort(all)
	if !slices.Equal(props, all) {
		t.Errorf("%s: schema properties %v, %s json fields %v", where, props, typ.Name(), all)
	}
	req := slices.Sorted(slices.Values(s.Required))
	slices.Sort(required)
	if !slices.Equal(req, required) {
		t.Errorf("%s: schema required %v, %s non-omitempty fields %v", where, req, typ.Name(), required)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("%s: additionalProperties must be false", where)
	}
}

func TestSchemaMatchesStruct(t *testing.T) {
	s := loadSchema(t)
	checkObject(t, "result", s, reflect.TypeFor[Result]())
	checkObject(t, "error", s.Properties["error"], reflect.TypeFor[SandboxError]())

	var want []string
	for _, st := range Statuses() {
		want = append(want, string(st))
	}
	if got := s.Properties["status"].Enum; !slices.Equal(got, want) {
		t.Errorf("schema status enum %v, Statuses() %v", got, want)
	}
	if c, ok := s.Properties["schema"].Const.(float64); !ok || int(c) != SchemaVersion {
		t.Errorf("schema.const = %v, want %d", s.Properties["schema"].Const, SchemaVersion)
	}
	for _, name := range []string{"exit_code", "signal"} {
		ty, _ := s.Properties[name].Type.([]any)
		if !slices.Contains(ty, any("null")) || !slices.Contains(ty, any("integer")) {
			t.Errorf("%s type = %v, want [integer null]", name, s.Properties[name].Type)
		}
	}
}

// TestDocMatchesStruct checks that result-schema.md lists every field and
// every status, and that its examples are exactly what WriteJSON writes.
func TestDocMatchesStruct(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("read doc: %v", err)
	}
	doc := string(data)
	all, _ := jsonFields(reflect.TypeFor[Result]())
	errFields, _ := jsonFields(reflect.TypeFor[SandboxError]())
	for _, name := range append(all, errFields...) {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("%s has no table row for field %q", docPath, name)
		}
	}
	for _, st := range Statuses() {
		if !strings.Contains(doc, "| `"+string(st)+"` |") {
			t.Errorf("%s has no table row for status %q", docPath, st)
		}
	}

	examples := regexp.MustCompile("(?s)```json\n(.*?)\n```").FindAllStringSubmatch(doc, -1)
	if len(examples) < 3 {
		t.Fatalf("%s has %d JSON examples, want at least 3", docPath, len(examples))
	}
	for _, ex := range examples {
		dec := json.NewDecoder(strings.NewReader(ex[1]))
		dec.DisallowUnknownFields()
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Errorf("example does not decode into Result: %v\n%s", err, ex[1])
			continue
		}
		if !r.Status.Valid() {
			t.Errorf("example has unknown status %q", r.Status)
		}
		var buf bytes.Buffer
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(buf.String(), "\n"); got != ex[1] {
			t.Errorf("example differs from WriteJSON output:\ndoc:  %s\ncode: %s", ex[1], got)
		}
	}
}
