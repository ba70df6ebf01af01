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
	Items                *jsonSchema           `json:"items"`
	AllOf                []jsonSchema          `json:"allOf"`
	If                   *jsonSchema           `json:"if"`
	Then                 *jsonSchema           `json:"then"`
}

// types returns the JSON types s allows: "type" as a string or a list.
func (s jsonSchema) types() []string {
	switch ty := s.Type.(type) {
	case string:
		return []string{ty}
	case []any:
		var out []string
		for _, v := range ty {
			str, _ := v.(string)
			out = append(out, str)
		}
		return out
	}
	return nil
}

// jsonFields returns the JSON names of t's fields, all of them and those
// without omitempty.
func jsonFields(t reflect.Type) (all, required []string) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue // never encoded
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		all = append(all, name)
		if o := strings.Split(opts, ","); !slices.Contains(o, "omitempty") && !slices.Contains(o, "omitzero") {
			required = append(required, name)
		}
	}
	return all, required
}

// jsonTypes returns the JSON types encoding/json writes for a Go type: a
// pointer adds "null".
func jsonTypes(t reflect.Type) []string {
	if t.Kind() == reflect.Pointer {
		return append(jsonTypes(t.Elem()), "null")
	}
	switch t.Kind() {
	case reflect.String:
		return []string{"string"}
	case reflect.Bool:
		return []string{"boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return []string{"integer"}
	case reflect.Float32, reflect.Float64:
		return []string{"number"}
	case reflect.Slice, reflect.Array:
		return []string{"array"}
	case reflect.Struct, reflect.Map:
		return []string{"object"}
	}
	return []string{"unknown Go kind " + t.Kind().String()}
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
	for f := range typ.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		p, ok := s.Properties[name]
		if !ok {
			continue // reported below
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer && slices.Contains(strings.Split(opts, ","), "omitempty") {
			ft = ft.Elem() // a nil pointer is left out, never written as null
		}
		got := slices.Sorted(slices.Values(p.types()))
		want := slices.Sorted(slices.Values(jsonTypes(ft)))
		if !slices.Equal(got, want) {
			t.Errorf("%s: property %q type %v, Go field %s (%s) encodes as %v", where, name, got, f.Name, f.Type, want)
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
	checkObject(t, "limits", s.Properties["limits"], reflect.TypeFor[Limits]())
	checkObject(t, "sandbox", s.Properties["sandbox"], reflect.TypeFor[Sandbox]())
	if items := s.Properties["files"].Items; items == nil {
		t.Error("schema files has no items")
	} else {
		checkObject(t, "files[]", *items, reflect.TypeFor[File]())
	}
	if items := s.Properties["violations"].Items; items == nil {
		t.Error("schema violations has no items")
	} else {
		checkObject(t, "violations[]", *items, reflect.TypeFor[Violation]())
		kinds := []string{ViolationImport, ViolationBuiltin, ViolationEvent, ViolationAttribute, ViolationNetwork, ViolationConstruct}
		if got := items.Properties["kind"].Enum; !slices.Equal(got, kinds) {
			t.Errorf("schema violations[].kind enum %v, want %v", got, kinds)
		}
	}

	checkObject(t, "network", s.Properties["network"], reflect.TypeFor[Network]())
	if items := s.Properties["network"].Properties["connections"].Items; items == nil {
		t.Error("schema network.connections has no items")
	} else {
		checkObject(t, "network.connections[]", *items, reflect.TypeFor[Connection]())
	}
	checkObject(t, "exception", s.Properties["exception"], reflect.TypeFor[Exception]())
	if items := s.Properties["outputs"].Items; items == nil {
		t.Error("schema outputs has no items")
	} else {
		checkObject(t, "outputs[]", *items, reflect.TypeFor[Output]())
		types := []string{OutputText, OutputHTML, OutputPNG}
		if got := items.Properties["type"].Enum; !slices.Equal(got, types) {
			t.Errorf("schema outputs[].type enum %v, want %v", got, types)
		}
	}

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
	if got := s.Properties["limit"].Enum; !slices.Equal(got, LimitNames()) {
		t.Errorf("schema limit enum %v, LimitNames() %v", got, LimitNames())
	}
	sb := s.Properties["sandbox"]
	if items := sb.Properties["namespaces"].Items; items == nil || !slices.Equal(items.Enum, NamespaceNames()) {
		t.Errorf("schema sandbox.namespaces items %+v, want enum NamespaceNames() %v", items, NamespaceNames())
	}
	if got := sb.Properties["cgroup"].Enum; !slices.Equal(got, CgroupNames()) {
		t.Errorf("schema sandbox.cgroup enum %v, CgroupNames() %v", got, CgroupNames())
	}
	if got := sb.Properties["memfd_noexec"].Enum; !slices.Equal(got, MemfdNoexecNames()) {
		t.Errorf("schema sandbox.memfd_noexec enum %v, MemfdNoexecNames() %v", got, MemfdNoexecNames())
	}
	if got := sb.Properties["host_ids"].Enum; !slices.Equal(got, HostIDsNames()) {
		t.Errorf("schema sandbox.host_ids enum %v, HostIDsNames() %v", got, HostIDsNames())
	}
	if items := s.Properties["limits_reached"].Items; items == nil || !slices.Equal(items.Enum, ReachedNames()) {
		t.Errorf("schema limits_reached items %+v, want enum ReachedNames() %v", items, ReachedNames())
	}
	checkLimitConditions(t, s)
}

// checkLimitConditions checks the schema's allOf conditions that tie each
// limit to its status: every limit must be covered once, with LimitStatus.
func checkLimitConditions(t *testing.T, s jsonSchema) {
	t.Helper()
	covered := map[string]int{}
	for _, c := range s.AllOf {
		if c.If == nil || c.Then == nil {
			continue
		}
		cond, ok := c.If.Properties["limit"]
		if !ok {
			continue
		}
		if !slices.Contains(c.If.Required, "limit") {
			t.Errorf("schema condition on limit %v does not require limit, so it also holds without one", cond.Enum)
		}
		limits := cond.Enum
		if str, ok := cond.Const.(string); ok {
			limits = append(limits, str)
		}
		status, _ := c.Then.Properties["status"].Const.(string)
		for _, l := range limits {
			covered[l]++
			if want := LimitStatus(l); Status(status) != want {
				t.Errorf("schema ties limit %q to status %q, LimitStatus says %q", l, status, want)
			}
		}
	}
	for _, l := range LimitNames() {
		if covered[l] != 1 {
			t.Errorf("schema has %d conditions tying limit %q to its status, want 1", covered[l], l)
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
	var names []string
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Result](), reflect.TypeFor[SandboxError](),
		reflect.TypeFor[Limits](), reflect.TypeFor[Sandbox](),
		reflect.TypeFor[Output](), reflect.TypeFor[Exception](),
		reflect.TypeFor[Network](), reflect.TypeFor[Connection](),
	} {
		all, _ := jsonFields(typ)
		names = append(names, all...)
	}
	for _, name := range names {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("%s has no table row for field %q", docPath, name)
		}
	}
	for _, name := range ReachedNames() {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("%s has no table row for limits_reached value %q", docPath, name)
		}
	}
	for _, st := range Statuses() {
		if !strings.Contains(doc, "| `"+string(st)+"` |") {
			t.Errorf("%s has no table row for status %q", docPath, st)
		}
	}
	for _, l := range LimitNames() {
		row := "| `" + l + "` | `" + string(LimitStatus(l)) + "` |"
		if !strings.Contains(doc, row) {
			t.Errorf("%s has no row %q for limit %q", docPath, row, l)
		}
	}

	examples := regexp.MustCompile("(?s)```json\n(.*?)\n```").FindAllStringSubmatch(doc, -1)
	if len(examples) < 4 {
		t.Fatalf("%s has %d JSON examples, want at least 4", docPath, len(examples))
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
		if r.Limit != "" && LimitStatus(r.Limit) != r.Status {
			t.Errorf("example has limit %q with status %q, want status %q", r.Limit, r.Status, LimitStatus(r.Limit))
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
