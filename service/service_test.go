package service

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	apidoc "github.com/nsbox/nsbox/docs/api"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/audit"
)

// The documents live at the repository root; tests run in the package
// directory.
const (
	openAPIPath      = "../docs/api/openapi.json"
	resultSchemaPath = "../docs/result.schema.json"
	regenerate       = "go test ./service -run '^TestOpenAPIDocument$' -update"
)

var update = flag.Bool("update", false, "rewrite docs/api/openapi.json's Result schema from docs/result.schema.json")

// canonical is the document's one written form: keys sorted, two-space
// indents, no HTML escaping, a final newline.
func canonical(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestOpenAPIDocument: the document's Result schema is the result schema
// of nsbox run --json (one schema, two documents), the file is in its
// canonical form, and the embedded copy is the file. -update rewrites it.
func TestOpenAPIDocument(t *testing.T) {
	doc := readJSON(t, openAPIPath)
	res := readJSON(t, resultSchemaPath)
	delete(res, "$schema")
	delete(res, "$id")
	doc["components"].(map[string]any)["schemas"].(map[string]any)["Result"] = res
	want := canonical(t, doc)
	if *update {
		if err := os.WriteFile(openAPIPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/api/openapi.json is stale (the result schema changed, or the file is not in canonical form); regenerate it with:\n\t%s", regenerate)
	}
	if !bytes.Equal(apidoc.OpenAPI, got) {
		t.Error("the embedded document differs from docs/api/openapi.json: rebuild")
	}
}

// TestRoutesMatchDocument: every route the server has is in the document
// and every operation of the document is a route.
func TestRoutesMatchDocument(t *testing.T) {
	doc := readJSON(t, openAPIPath)
	var documented, served []string
	for p, ops := range doc["paths"].(map[string]any) {
		for m := range ops.(map[string]any) {
			if m == "parameters" { // shared by the path's operations
				continue
			}
			documented = append(documented, strings.ToUpper(m)+" "+p)
		}
	}
	for _, rt := range routes {
		// A wildcard that takes the rest of the path ({path...}) is a
		// plain path parameter in the document.
		served = append(served, rt.method+" "+strings.ReplaceAll(rt.path, "...}", "}"))
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("document's operations %v, server's routes %v", documented, served)
	}
}

// schemas compiles the document's component schemas for validation.
func schemas(t *testing.T) func(name string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	return func(name string) *jsonschema.Schema {
		s, err := c.Compile("openapi.json#/components/schemas/" + name)
		if err != nil {
			t.Fatalf("compile schema %s: %v", name, err)
		}
		return s
	}
}

// validate checks that body is a valid instance of the named schema.
func validate(t *testing.T, schema func(string) *jsonschema.Schema, name string, body []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, body)
	}
	if err := schema(name).Validate(v); err != nil {
		t.Errorf("response does not validate against %s: %v\n%s", name, err, body)
	}
}

// testServer is a server with the built-in default policy and a fresh
// audit log.
func testServer(t *testing.T, mod func(*Config)) (*Server, string) {
	t.Helper()
	pol, err := policies.Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "audit.db")
	cfg := Config{Policies: map[string]*policies.Policy{"default": pol}, AuditDB: db, Version: "test", MaxConcurrentRuns: 2, MaxBody: 1 << 20}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// do sends one request to s's handler and returns the status and body.
func do(t *testing.T, s *Server, method, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), b
}

// TestErrors: every request the service does not attempt is answered with
// its status and a JSON error of the document's Error schema.
func TestErrors(t *testing.T) {
	schema := schemas(t)
	s, _ := testServer(t, nil)
	big := `{"code":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown path", "GET", "/v1/nothing", "", 404, "not_found"},
		{"root", "GET", "/", "", 404, "not_found"},
		{"wrong method", "GET", "/v1/runs", "", 405, "method_not_allowed"},
		{"wrong method on health", "DELETE", "/v1/health", "", 405, "method_not_allowed"},
		{"not JSON", "POST", "/v1/runs", "print(1)", 400, "bad_request"},
		{"unknown field", "POST", "/v1/runs", `{"code":"1","colect_files":true}`, 400, "bad_request"},
		{"wrong type", "POST", "/v1/runs", `{"code":1}`, 400, "bad_request"},
		{"two values", "POST", "/v1/runs", `{"code":"1"} {}`, 400, "bad_request"},
		{"policy not served", "POST", "/v1/runs", `{"code":"1","policy":"permissive"}`, 403, "policy_refused"},
		{"policy file not listed", "POST", "/v1/runs", `{"code":"1","policy":"/etc/passwd"}`, 403, "policy_refused"},
		{"body too large", "POST", "/v1/runs", big, 413, "body_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, s, tc.method, tc.path, tc.body)
			if status != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
				t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, status, body, tc.status, tc.code)
			}
			validate(t, schema, "Error", body)
		})
	}
}

// TestBodyTooLargeWithoutLength: a body sent without Content-Length is
// cut at the limit and refused, not read to its end.
func TestBodyTooLargeWithoutLength(t *testing.T) {
	s, _ := testServer(t, nil)
	req := httptest.NewRequest("POST", "/v1/runs", io.MultiReader(strings.NewReader(`{"code":"`), &endless{}))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != 413 {
		t.Errorf("status %d, want 413: %s", rec.Code, rec.Body)
	}
}

// endless is a reader that never ends.
type endless struct{}

func (*endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestTooManyRuns: with every slot taken, a run is refused at once with
// 429 and Retry-After.
func TestTooManyRuns(t *testing.T) {
	schema := schemas(t)
	s, _ := testServer(t, nil)
	for range cap(s.runs) {
		s.runs <- struct{}{}
	}
	status, hdr, body := do(t, s, "POST", "/v1/runs", `{"code":"print(1)"}`)
	if status != 429 || hdr.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q: %s; want 429 with Retry-After", status, hdr.Get("Retry-After"), body)
	}
	validate(t, schema, "Error", body)
}

// TestToken: with a token, every endpoint needs it, and only it.
func TestToken(t *testing.T) {
	schema := schemas(t)
	token := "0123456789abcdef0123456789abcdef"
	s, _ := testServer(t, func(c *Config) { c.Token = []byte(token) })
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Bearer " + token + "x"}, {"Authorization", token}, {"Authorization", "Basic " + token}} {
		for _, path := range []string{"/v1/health", "/v1/openapi.json", "/v1/nothing"} {
			status, h, body := do(t, s, "GET", path, "", hdr...)
			if status != 401 || h.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %q: %d, want 401 with WWW-Authenticate", path, hdr, status)
			}
			validate(t, schema, "Error", body)
		}
	}
	status, _, body := do(t, s, "GET", "/v1/health", "", "Authorization", "Bearer "+token)
	if status != 200 {
		t.Errorf("GET /v1/health with the token: %d %s", status, body)
	}
}

// TestHealthAndDocument: health validates against its schema, and the
// document served is the embedded file.
func TestHealthAndDocument(t *testing.T) {
	schema := schemas(t)
	s, _ := testServer(t, nil)
	status, _, body := do(t, s, "GET", "/v1/health", "")
	if status != 200 {
		t.Fatalf("health: %d %s", status, body)
	}
	validate(t, schema, "Health", body)
	status, hdr, body := do(t, s, "GET", "/v1/openapi.json", "")
	if status != 200 || !bytes.Equal(body, apidoc.OpenAPI) || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("openapi.json: %d, %s, %d bytes (want the embedded %d)", status, hdr.Get("Content-Type"), len(body), len(apidoc.OpenAPI))
	}
}

// TestRefusedRunIsResultAndRow: a run refused for its input is answered
// 200 with the result nsbox run --json would print (status
// sandbox_error, step input), and recorded in the audit log. No sandbox
// is needed for these.
func TestRefusedRunIsResultAndRow(t *testing.T) {
	schema := schemas(t)
	s, db := testServer(t, nil)
	for _, tc := range []struct{ name, body, msg string }{
		{"bad label", `{"code":"print(1)","labels":{"a b":"c"}}`, "1-64 characters"},
		{"zero timeout", `{"code":"print(1)","timeout":0}`, "positive"},
		{"negative output limit", `{"code":"print(1)","output_limit":-1}`, "positive"},
		{"timeout above the policy's", `{"code":"print(1)","timeout":100000}`, "flags can only lower"},
		{"empty program", `{"code":""}`, "empty"},
		{"bad base64", `{"code":"1","files":[{"path":"a","content_base64":"%%%"}]}`, "content_base64"},
		{"bad mode", `{"code":"1","files":[{"path":"a","content_base64":"","mode":4095}]}`, "permission bits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, s, "POST", "/v1/runs", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			validate(t, schema, "Result", body)
			var r struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Error  struct{ Step, Message string }
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			if r.Status != "sandbox_error" || !strings.Contains(r.Error.Message, tc.msg) {
				t.Errorf("result %s, want sandbox_error with %q", body, tc.msg)
			}
			d, err := audit.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			row, err := d.Get(r.ID)
			if err != nil || row.Status != "sandbox_error" {
				t.Errorf("audit row of %s: %+v, %v", r.ID, row, err)
			}
		})
	}
}

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     Address
		loopback bool
		bad      bool
	}{
		{in: "unix:/run/nsbox/nsbox.sock", want: Address{"unix", "/run/nsbox/nsbox.sock"}},
		{in: "unix:/run//x/../nsbox.sock", want: Address{"unix", "/run/nsbox.sock"}},
		{in: "tcp:127.0.0.1:8080", want: Address{"tcp", "127.0.0.1:8080"}, loopback: true},
		{in: "tcp:[::1]:8080", want: Address{"tcp", "[::1]:8080"}, loopback: true},
		{in: "tcp:localhost:8080", want: Address{"tcp", "localhost:8080"}, loopback: true},
		{in: "tcp:0.0.0.0:8080", want: Address{"tcp", "0.0.0.0:8080"}},
		{in: "tcp::8080", want: Address{"tcp", ":8080"}},
		{in: "tcp:10.0.0.1:80", want: Address{"tcp", "10.0.0.1:80"}},
		{in: "unix:relative.sock", bad: true},
		{in: "tcp:8080", bad: true},
		{in: "http://localhost", bad: true},
		{in: "/run/nsbox.sock", bad: true},
	} {
		got, err := ParseAddress(tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: accepted as %+v", tc.in, got)
		case !tc.bad && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		case !tc.bad && got.Network == "tcp" && got.Loopback() != tc.loopback:
			t.Errorf("%q: loopback %v", tc.in, got.Loopback())
		}
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "0123456789abcdef0123\nsecond line\n", 0o600)
	if tok, err := ReadToken(good); err != nil || string(tok) != "0123456789abcdef0123" {
		t.Errorf("good token: %q, %v", tok, err)
	}
	for _, tc := range []struct{ path, msg string }{
		{write("readable", "0123456789abcdef0123\n", 0o644), "chmod 600"},
		{write("short", "short\n", 0o600), "16 to 4096"},
		{write("empty", "", 0o600), "token file"},
		{write("huge", strings.Repeat("x", 5000), 0o600), "16 to 4096"},
		{dir, "not a regular file"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		if _, err := ReadToken(tc.path); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.msg)
		}
	}
}

// TestStaleSocket: a socket nothing answers on is replaced; one a
// service answers on, or a file that is not a socket, is refused.
func TestStaleSocket(t *testing.T) {
	dir := t.TempDir()
	a := Address{"unix", filepath.Join(dir, "sub", "nsbox.sock")}
	ln, err := Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(a.Addr)
	if err != nil || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("socket mode %v, %v: others must not connect", fi.Mode(), err)
	}
	if _, err := Listen(a); err == nil || !strings.Contains(err.Error(), "another service") {
		t.Errorf("second listener on a live socket: %v", err)
	}
	// A listener that leaves its socket behind, as a killed service does.
	ln.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(a.Addr); err != nil {
		t.Fatalf("the stale socket should be there: %v", err)
	}
	ln, err = Listen(a)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	ln.Close()
	if _, err := os.Stat(a.Addr); !os.IsNotExist(err) {
		t.Errorf("the socket outlived its listener: %v", err)
	}
	file := Address{"unix", filepath.Join(dir, "file")}
	if err := os.WriteFile(file.Addr, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "something else") {
		t.Errorf("over a regular file: %v", err)
	}
}

// TestMetrics: GET /v1/metrics is the Prometheus text format: every
// family has its HELP and TYPE, requests are counted by route and code,
// the latency histogram's buckets are cumulative and end at +Inf with the
// count, and a pool size set by the pool shows.
func TestMetrics(t *testing.T) {
	s, _ := testServer(t, nil)
	do(t, s, "GET", "/v1/health", "")
	do(t, s, "GET", "/v1/health", "")
	do(t, s, "GET", "/nowhere", "")
	s.SetPoolSize("default", 2)
	status, hdr, body := do(t, s, "GET", "/v1/metrics", "")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("%d %q", status, hdr.Get("Content-Type"))
	}
	text := string(body)
	for _, want := range []string{
		"# TYPE nsbox_runs_total counter\n",
		"# TYPE nsbox_http_request_duration_seconds histogram\n",
		"nsbox_sessions_open 0\n",
		"nsbox_runs_active 0\n",
		`nsbox_pool_waiting{policy="default"} 2` + "\n",
		`nsbox_http_requests_total{method="GET",route="/v1/health",code="200"} 2` + "\n",
		`nsbox_http_requests_total{method="other",route="other",code="404"} 1` + "\n",
		`nsbox_http_request_duration_seconds_bucket{method="GET",route="/v1/health",le="+Inf"} 2` + "\n",
		`nsbox_http_request_duration_seconds_count{method="GET",route="/v1/health"} 2` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	// Buckets never decrease.
	last := int64(-1)
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, `nsbox_http_request_duration_seconds_bucket{method="GET",route="/v1/health"`) {
			continue
		}
		n, err := strconv.ParseInt(line[strings.LastIndexByte(line, ' ')+1:], 10, 64)
		if err != nil || n < last {
			t.Errorf("bucket line %q after %d", line, last)
		}
		last = n
	}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "# ") && len(strings.Fields(line)) != 2 {
			t.Errorf("not a sample line: %q", line)
		}
	}
}

// TestDotSegmentsRefused: a path with . or .. is answered 400
// path_refused, not redirected to its cleaned form.
func TestDotSegmentsRefused(t *testing.T) {
	s, _ := testServer(t, nil)
	for _, p := range []string{"/v1/sessions/x/files/../../etc/passwd", "/v1/sessions/x/files/./a", "/v1/../v1/health"} {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://nsbox"+p, nil))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "path_refused") {
			t.Errorf("GET %s: %d %s", p, w.Code, w.Body)
		}
	}
}
