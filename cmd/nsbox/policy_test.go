package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/policies"
)

// runPolicy runs `nsbox policy ARGS...` and returns its output and the
// exit status main would give it.
func runPolicy(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:           "nsbox",
		Commands:       []*cli.Command{policyCommand()},
		Writer:         &out,
		ErrWriter:      &errOut,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	code := 0
	if err := app.Run(append([]string{"nsbox", "policy"}, args...)); err != nil {
		code = exitCode(err)
		out.WriteString(err.Error())
	}
	return out.String(), code
}

// TestPolicyShowResolvedRoundTrip: what show --resolved prints is a
// policy file that gives a run exactly the same policy, for every
// built-in and for a user policy that extends one.
func TestPolicyShowResolvedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	child := filepath.Join(dir, "child.toml")
	if err := os.WriteFile(child, []byte("extends = \"datasci\"\n[limits]\ntimeout = \"90s\"\n"+
		"[allowlist]\nimports_remove = [\"numpy\"]\npreload_remove = [\"numpy\"]\ndeny_builtins_add = [\"eval\"]\n[env]\nTZ = \"UTC\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(policies.BuiltinNames(), child) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			out, code := runPolicy(t, "show", "--resolved", name)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			if strings.Contains(out, "extends") || strings.Contains(out, "_add") {
				t.Errorf("resolved output still composes:\n%s", out)
			}
			path := filepath.Join(t.TempDir(), "resolved.toml")
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := policies.Resolve(path)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			want, err := policies.Resolve(name)
			if err != nil {
				t.Fatal(err)
			}
			got.Name, got.SHA256 = want.Name, want.SHA256 // the file's own, which differ
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip of %s:\n%+v\nwant\n%+v", name, got, want)
			}
			if !strings.Contains(out, want.SHA256) {
				t.Errorf("output does not give the policy's sha256 %s", want.SHA256)
			}
		})
	}
}

func TestPolicyShowText(t *testing.T) {
	out, code := runPolicy(t, "show", "datasci")
	_, text, err := policies.Source("datasci")
	if code != 0 || err != nil || out != string(text) {
		t.Errorf("show datasci: exit %d, %v, output\n%s\nwant the embedded source", code, err, out)
	}
	if !strings.Contains(out, `extends = "default"`) {
		t.Errorf("show datasci does not show the file as written:\n%s", out)
	}
}

func TestPolicyShowJSON(t *testing.T) {
	out, code := runPolicy(t, "show", "--json", "datasci")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var got struct {
		Name, SHA256 string
		Limits       struct{ Timeout string }
		Allowlist    struct{ Imports []string }
		Env          map[string]string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	p, _ := policies.Builtin("datasci")
	if got.Name != "datasci" || got.SHA256 != p.SHA256 || got.Limits.Timeout != "1m" ||
		!reflect.DeepEqual(got.Allowlist.Imports, p.Allowlist.Imports) || got.Env["MPLBACKEND"] != "Agg" {
		t.Errorf("show --json datasci = %+v", got)
	}
	// Keys come in the reference's order.
	if i, j := strings.Index(out, `"python"`), strings.Index(out, `"env"`); i < 0 || j < i {
		t.Errorf("python after env in\n%s", out)
	}
}

func TestPolicyShowErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("extends = \"default\"\n\n[limits]\ntimeout = \"45h\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		has  string
	}{
		{[]string{"show", bad}, exitPolicyInvalid, bad + ":4: limits.timeout: 45h exceeds the maximum 24h"},
		{[]string{"show", "--resolved", bad}, exitPolicyInvalid, bad + ":4: limits.timeout"},
		{[]string{"show", "lax"}, exitPolicyInvalid, `unknown policy "lax"`},
		{[]string{"show"}, 125, "takes one policy"},
		{[]string{"list", "x"}, 125, "takes no arguments"},
	}
	for _, tt := range tests {
		out, code := runPolicy(t, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.has) {
			t.Errorf("policy %v: exit %d, %q; want exit %d and %q", tt.args, code, out, tt.code, tt.has)
		}
	}
}

func TestPolicyList(t *testing.T) {
	out, code := runPolicy(t, "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(policies.BuiltinNames()) {
		t.Fatalf("list printed %d lines, want one per built-in:\n%s", len(lines), out)
	}
	for i, name := range policies.BuiltinNames() {
		p, _ := policies.Builtin(name)
		if f := strings.Fields(lines[i]); f[0] != name || !strings.HasSuffix(lines[i], p.Description) {
			t.Errorf("line %q, want %s and its description", lines[i], name)
		}
	}
}
