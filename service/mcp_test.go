package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/policies"
)

// TestMCPTools: the tools a model sees, without a sandbox: each with an
// object input schema and a description that names every policy served
// with its limits and says the network is off; the result tools' output
// schema is the API's Result; a policy not served, or a session of
// another connection, is a tool error with the API's code.
func TestMCPTools(t *testing.T) {
	s, _ := testServer(t, func(c *Config) {
		strict, err := policies.Builtin("strict")
		if err != nil {
			t.Fatal(err)
		}
		c.Policies["strict"] = strict
	})
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.mcp.srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"run_python": true, "create_session": true, "run_cell": true, "upload_file": true, "download_file": true, "list_files": true, "close_session": true}
	schema, err := resultSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if !want[tool.Name] {
			t.Errorf("tool %s: not one of %v", tool.Name, want)
		}
		delete(want, tool.Name)
		in, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(in), `"type":"object"`) {
			t.Errorf("%s: input schema %s", tool.Name, in)
		}
		if tool.Name == "run_python" || tool.Name == "create_session" {
			for _, w := range []string{"network is off", "default (", "strict (", "wall clock", "memory"} {
				if !strings.Contains(tool.Description, w) {
					t.Errorf("%s's description lacks %q: %s", tool.Name, w, tool.Description)
				}
			}
		}
		out, _ := json.Marshal(tool.OutputSchema)
		switch tool.Name {
		case "run_python", "run_cell", "close_session":
			if compact(t, out) != compact(t, schema) {
				t.Errorf("%s: output schema is not the API's Result", tool.Name)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("tools missing: %v", want)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"run_python", map[string]any{"code": "1", "policy": "permissive"}, "policy_refused: policy \"permissive\" is not served here (served: default, strict)"},
		{"run_cell", map[string]any{"session_id": "0123", "code": "1"}, "no_session"},
		{"create_session", map[string]any{"idle_timeout": -1}, "bad_request"},
		{"run_python", map[string]any{"cod": "1"}, "additional properties [\"cod\"]"},
		{"run_python", map[string]any{"policy": "default"}, "code"},
	} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		text := ""
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !r.IsError || !strings.Contains(text, tc.code) {
			t.Errorf("%s %v: error %v %q, want a tool error with %q", tc.tool, tc.args, r.IsError, text, tc.code)
		}
	}
}

// compact is JSON in one canonical form (keys sorted).
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
