package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
)

// TestMain lets this test binary be doctor's probe child, as the nsbox
// binary is through probeCommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == hostcheck.ChildCommand {
		os.Exit(hostcheck.ChildMain(os.Args[2:]))
	}
	// Race-enabled children sleep a second at exit unless told not to.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

const seccompHint = "rebuild the kernel with CONFIG_SECCOMP_FILTER=y"

// withoutSeccomp is a host with everything but seccomp, and an
// informational feature missing.
func withoutSeccomp() hostcheck.Report {
	return hostcheck.Report{
		Kernel: "6.1.0-test",
		Checks: []hostcheck.Check{
			{Name: "user namespace", Group: "namespaces", OK: true, Detail: "created, ids mapped", MinKernel: "3.8"},
			{Name: "cgroups", Group: "cgroups", OK: true, Detail: "v2 (unified)", MinKernel: "4.5"},
			{Name: "seccomp", Group: "seccomp", OK: false, Detail: "no filter mode", MinKernel: "4.14", Hint: seccompHint},
			{Name: "landlock", Group: "landlock", OK: true, Detail: "ABI 3", MinKernel: "5.13"},
			{Name: "proc subset=pid", OK: false, Detail: "mount: invalid argument", MinKernel: "5.8", Hint: "upgrade to 5.8"},
		},
		Notes: []string{"no memory.memsw.*"},
	}
}

func TestDoctorText(t *testing.T) {
	var b bytes.Buffer
	d := diagnose(withoutSeccomp(), "strict", []string{"namespaces", "cgroups", "seccomp"})
	if err := d.writeText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	row := func(feature string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, feature+"  ") {
				return l
			}
		}
		t.Errorf("no row for %s", feature)
		return ""
	}
	for _, f := range []string{"FEATURE", "STATUS", "DETAIL", "MIN KERNEL", "REQUIREMENT"} {
		if !strings.Contains(lines[2], f) {
			t.Errorf("header %q lacks %s", lines[2], f)
		}
	}
	if r := strings.Fields(row("seccomp")); !slices.Equal(r, []string{"seccomp", "MISSING", "no", "filter", "mode", "4.14", "seccomp"}) {
		t.Errorf("seccomp row %q", r)
	}
	if r := strings.Fields(row("user namespace")); r[2] != "ok" {
		t.Errorf("user namespace row %q", r)
	}
	if r := strings.Fields(row("proc subset=pid")); r[2] != "MISSING" || r[len(r)-1] != "-" {
		t.Errorf("informational row %q", r)
	}
	for _, want := range []string{
		"Linux 6.1.0-test",
		"Notes:\n- no memory.memsw.*",
		"How to fix what is missing:\n- seccomp: " + seccompHint + "\n- proc subset=pid: upgrade to 5.8\n",
		"Policy strict: CANNOT be enforced on this host: missing seccomp (of namespaces, cgroups, seccomp)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// The same host satisfies a policy that does not require seccomp.
	b.Reset()
	if err := diagnose(withoutSeccomp(), "permissive", []string{"namespaces"}).writeText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Policy permissive: every requirement (namespaces) can be enforced on this host.") {
		t.Errorf("permissive verdict missing from\n%s", b.String())
	}
}

func TestDoctorJSON(t *testing.T) {
	var b bytes.Buffer
	if err := diagnose(withoutSeccomp(), "strict", []string{"namespaces", "cgroups", "seccomp"}).writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, b.String())
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"checks", "kernel", "missing", "notes", "ok", "policy", "requires"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v (the usage text documents them)", keys, want)
	}
	var d struct {
		Kernel  string
		Checks  []map[string]any
		Missing []string
		OK      bool
	}
	if err := json.Unmarshal(b.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.OK || !slices.Equal(d.Missing, []string{"seccomp"}) || d.Kernel != "6.1.0-test" {
		t.Errorf("ok=%v missing=%v kernel=%q", d.OK, d.Missing, d.Kernel)
	}
	sc := d.Checks[2]
	if sc["name"] != "seccomp" || sc["ok"] != false || sc["hint"] != seccompHint || sc["min_kernel"] != "4.14" || sc["group"] != "seccomp" {
		t.Errorf("seccomp check %v", sc)
	}
	if len(d.Checks[0]) != 6 {
		t.Errorf("check has keys %v, want name, group, ok, detail, min_kernel, hint", d.Checks[0])
	}

	// A host that lacks nothing: empty lists, not null.
	b.Reset()
	if err := diagnose(hostcheck.Report{Kernel: "x"}, "p", nil).writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"checks": []`, `"notes": []`, `"requires": []`, `"missing": []`, `"ok": true`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("empty report lacks %s:\n%s", want, b.String())
		}
	}
}

// runDoctor runs `nsbox doctor ARGS` and returns its stdout and exit code.
func runDoctor(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{
		Name:      "nsbox",
		Commands:  []*cli.Command{doctorCommand(), probeCommand()},
		Writer:    &out,
		ErrWriter: io.Discard,
		// Return the exit code instead of exiting the test binary.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run(append([]string{"nsbox", "doctor"}, args...)); err != nil {
		t.Logf("doctor %v: %v", args, err)
		return out.String(), exitCode(err)
	}
	return out.String(), 0
}

// fakeProbe makes doctor see report r.
func fakeProbe(t *testing.T, r hostcheck.Report) {
	saved := probeHost
	probeHost = func(string) hostcheck.Report { return r }
	t.Cleanup(func() { probeHost = saved })
}

func TestDoctorExitStatus(t *testing.T) {
	fakeProbe(t, withoutSeccomp())
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, exitCannotEnforce}, // strict is the default and requires seccomp
		{[]string{"--policy", "strict"}, exitCannotEnforce},
		{[]string{"--policy", "strict", "--json"}, exitCannotEnforce},
		{[]string{"-p", "permissive"}, 0}, // requires namespaces only
		{[]string{"--policy", "no-such-policy"}, 125},
		{[]string{"extra-arg"}, 125},
	} {
		out, code := runDoctor(t, tc.args...)
		if code != tc.code {
			t.Errorf("doctor %v: exit %d, want %d; output:\n%s", tc.args, code, tc.code, out)
		}
	}
}

func TestStrictRequirements(t *testing.T) {
	pol, err := policies.Builtin("strict")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := policyRequirements(pol), []string{"namespaces", "cgroups", "seccomp", "memfd_noexec"}; !slices.Equal(got, want) {
		t.Errorf("strict requires %v, want %v", got, want)
	}
}

// TestRequirementNames: every requirement a policy may name is one
// hostcheck knows, and the other way round.
func TestRequirementNames(t *testing.T) {
	if got, want := hostcheck.Requirements(), policies.Requirements; !slices.Equal(got, want) {
		t.Errorf("hostcheck.Requirements() = %v, policies.Requirements = %v", got, want)
	}
}

// TestDoctorHost runs the real doctor on this host, with this test binary
// as the probe child. The test machines can enforce every built-in
// policy.
func TestDoctorHost(t *testing.T) {
	mustwork.NeedRoot(t)
	out, code := runDoctor(t, "--policy", "strict", "--json")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var d diagnosis
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !d.OK || len(d.Missing) != 0 {
		t.Errorf("ok=%v missing=%v", d.OK, d.Missing)
	}
	for _, c := range d.Checks {
		if !c.OK {
			t.Errorf("%s: %s (hint: %s)", c.Name, c.Detail, c.Hint)
		}
	}
	if len(d.Checks) < 15 {
		t.Errorf("only %d checks", len(d.Checks))
	}
}

func TestWrap(t *testing.T) {
	long := strings.Repeat("word ", 50)
	got := wrap("- ", long)
	for i, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if len(l) > 100 {
			t.Errorf("line %d has %d columns", i, len(l))
		}
		if i > 0 && !strings.HasPrefix(l, "  word") {
			t.Errorf("line %d not indented: %q", i, l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != "- "+strings.TrimSpace(long) {
		t.Error("wrap lost or changed words")
	}
}

// TestDoctorJSONFailure: with --json, a doctor that fails (a bad policy)
// still prints one JSON object, naming the policy and the error.
func TestDoctorJSONFailure(t *testing.T) {
	fakeProbe(t, withoutSeccomp())
	out, code := runDoctor(t, "--policy", "no-such-policy", "--json")
	if code != 125 {
		t.Errorf("exit %d, want 125", code)
	}
	var got struct {
		Policy string `json:"policy"`
		OK     *bool  `json:"ok"`
		Error  string `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("more than one object:\n%s", out)
	}
	if got.Policy != "no-such-policy" || got.OK == nil || *got.OK || !strings.Contains(got.Error, "no-such-policy") {
		t.Errorf("got %+v", got)
	}
	// Without --json: nothing on stdout, the message is the error.
	if out, _ := runDoctor(t, "--policy", "no-such-policy"); out != "" {
		t.Errorf("plain mode printed %q", out)
	}
}
