package result

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func intp(i int) *int { return &i }

func TestProcessExitCode(t *testing.T) {
	tests := []struct {
		status   Status
		exitCode *int
		signal   *int
		want     int
	}{
		{StatusOK, intp(0), nil, 0},
		{StatusOK, nil, nil, 0},
		{StatusError, intp(1), nil, 1},
		{StatusError, intp(3), nil, 3},
		{StatusError, intp(255), nil, 255},
		{StatusError, nil, intp(11), 139},
		{StatusError, nil, intp(6), 134},
		{StatusError, nil, nil, 1},
		{StatusTimeout, nil, intp(9), 124},
		{StatusMemoryLimit, nil, intp(9), 137},
		{StatusOutputLimit, nil, intp(9), 137},
		{StatusPolicyViolation, nil, nil, 126},
		{StatusKilled, nil, intp(9), 137},
		{StatusKilled, intp(0), nil, 137},
		{StatusSandboxError, nil, nil, 125},
		{Status("bogus"), intp(0), nil, 125},
		{Status(""), intp(0), nil, 125},
	}
	covered := map[Status]bool{}
	for _, tt := range tests {
		r := &Result{Status: tt.status, ExitCode: tt.exitCode, Signal: tt.signal}
		if got := r.ProcessExitCode(); got != tt.want {
			t.Errorf("status %q exit %v signal %v: ProcessExitCode() = %d, want %d",
				tt.status, deref(tt.exitCode), deref(tt.signal), got, tt.want)
		}
		covered[tt.status] = true
	}
	for _, s := range Statuses() {
		if !covered[s] {
			t.Errorf("status %q has no exit code test", s)
		}
	}
}

func deref(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func TestStatusValid(t *testing.T) {
	for _, s := range Statuses() {
		if !s.Valid() {
			t.Errorf("%q not Valid", s)
		}
	}
	if Status("OK").Valid() || Status("").Valid() {
		t.Error("unknown status reported Valid")
	}
}

// decodeObject writes r and decodes it as a generic object, checking the
// framing: exactly one object and one trailing newline.
func decodeObject(t *testing.T, r *Result) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	out := buf.String()
	if !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("WriteJSON output is not one line ending in a newline: %q", out)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("output is not a JSON object: %v", err)
	}
	return m
}

func TestJSONKeys(t *testing.T) {
	required := []string{"schema", "id", "status", "exit_code", "signal", "stdout", "stderr",
		"stdout_truncated", "stderr_truncated", "duration_ms", "cpu_ms", "peak_memory_bytes",
		"policy", "limits", "limits_reached", "sandbox", "violations"}

	m := decodeObject(t, New("r1", "default"))
	if len(m) != len(required) {
		t.Errorf("minimal result has keys %v, want exactly %v", keys(m), required)
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			t.Errorf("minimal result lacks key %q", k)
		}
	}
	for _, k := range []string{"exit_code", "signal", "cpu_ms", "peak_memory_bytes", "limits", "sandbox"} {
		if m[k] != nil {
			t.Errorf("minimal result %s = %v, want null", k, m[k])
		}
	}
	if m["schema"] != float64(SchemaVersion) {
		t.Errorf("schema = %v, want %d", m["schema"], SchemaVersion)
	}

	full := New("r2", "default")
	full.Status = StatusSandboxError
	full.Reason = "why"
	full.Limit = LimitMemory
	full.CPUMS, full.PeakMemoryBytes = Int64(1), Int64(2)
	full.Limits = &Limits{MemoryBytes: Int64(3), Pids: Int64(4), CPUs: Float64(0.5)}
	full.Sandbox = &Sandbox{Namespaces: NamespaceNames(), Cgroup: CgroupV2, Seccomp: "strict", LandlockABI: 6}
	full.ExitCode, full.Signal = intp(0), intp(9)
	SetStdout(full, []byte{0xff})
	SetStderr(full, []byte{0xfe})
	full.Error = &SandboxError{Step: "execve", Errno: "ENOENT", Message: "no"}
	m = decodeObject(t, full)
	all := append(required, "reason", "limit", "stdout_base64", "stderr_base64", "error")
	if len(m) != len(all) {
		t.Errorf("full result has keys %v, want exactly %v", keys(m), all)
	}
	for _, k := range all {
		if _, ok := m[k]; !ok {
			t.Errorf("full result lacks key %q", k)
		}
	}
}

// TestJSONOrder checks that the fields are written in declaration order, the
// order docs/result-schema.md lists them in.
func TestJSONOrder(t *testing.T) {
	r := New("r", "default")
	r.Reason, r.Limit = "wall clock 2s", LimitWallTime
	r.Limits = &Limits{}
	r.Sandbox = &Sandbox{}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	order := []string{"schema", "id", "status", "reason", "limit", "exit_code", "signal",
		"stdout", "stderr", "stdout_truncated", "stderr_truncated", "duration_ms", "cpu_ms",
		"peak_memory_bytes", "policy", "limits", "sandbox", "violations"}
	last := -1
	for _, k := range order {
		i := strings.Index(out, `"`+k+`":`)
		if i <= last {
			t.Errorf("key %q at %d, not after the previous key (at %d): %s", k, i, last, out)
		}
		last = i
	}
}

func TestNilNamespacesWrittenAsArray(t *testing.T) {
	r := New("r", "p")
	r.Sandbox = &Sandbox{Cgroup: CgroupNone, Seccomp: SeccompNone}
	m := decodeObject(t, r)
	sb, _ := m["sandbox"].(map[string]any)
	if ns, ok := sb["namespaces"].([]any); !ok || len(ns) != 0 {
		t.Errorf("sandbox.namespaces = %#v, want []", sb["namespaces"])
	}
	if r.Sandbox.Namespaces != nil {
		t.Error("WriteJSON modified its receiver's Sandbox")
	}
}

func TestLimitStatus(t *testing.T) {
	want := map[string]Status{
		LimitWallTime: StatusTimeout, LimitCPUTime: StatusTimeout, LimitMemory: StatusMemoryLimit,
		LimitStdout: StatusOutputLimit, LimitStderr: StatusOutputLimit,
	}
	if len(LimitNames()) != len(want) {
		t.Errorf("LimitNames() = %v, want the %d limits of this test", LimitNames(), len(want))
	}
	for _, l := range LimitNames() {
		if got := LimitStatus(l); got != want[l] || !got.Valid() {
			t.Errorf("LimitStatus(%q) = %q, want %q", l, got, want[l])
		}
	}
	if got := LimitStatus("bogus"); got != "" {
		t.Errorf("LimitStatus(bogus) = %q, want \"\"", got)
	}
}

func TestPointerHelpers(t *testing.T) {
	a, b := Int64(7), Int64(7)
	if *a != 7 || a == b {
		t.Errorf("Int64(7) = %v, %v: want distinct pointers to 7", a, b)
	}
	if f := Float64(0.5); *f != 0.5 {
		t.Errorf("*Float64(0.5) = %v", *f)
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestZeroSchemaWrittenAsCurrent(t *testing.T) {
	r := &Result{}
	if m := decodeObject(t, r); m["schema"] != float64(SchemaVersion) {
		t.Errorf("schema = %v, want %d", m["schema"], SchemaVersion)
	}
	if r.Schema != 0 {
		t.Error("WriteJSON modified its receiver")
	}
}

func TestEncodeText(t *testing.T) {
	tests := []struct {
		in       []byte
		wantText string
		wantB64  bool
	}{
		{nil, "", false},
		{[]byte("héllo ✓\n"), "héllo ✓\n", false},
		{[]byte("a\xffb"), "a\uFFFDb", true},
		{[]byte("\xc3"), "\uFFFD", true},           // truncated sequence
		{[]byte("x\xed\xa0\x80"), "x\uFFFD", true}, // surrogate half
		{[]byte{0, 1, 2}, "\x00\x01\x02", false},
	}
	for _, tt := range tests {
		text, b64 := EncodeText(tt.in)
		if text != tt.wantText {
			t.Errorf("EncodeText(%q) text = %q, want %q", tt.in, text, tt.wantText)
		}
		if (b64 != "") != tt.wantB64 {
			t.Errorf("EncodeText(%q) b64 = %q, want present=%v", tt.in, b64, tt.wantB64)
		}
		if b64 != "" {
			got, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || !bytes.Equal(got, tt.in) {
				t.Errorf("EncodeText(%q) b64 decodes to %q, %v", tt.in, got, err)
			}
		}
	}
}

// TestInvalidUTF8RoundTrip checks that the exact bytes survive the JSON.
func TestInvalidUTF8RoundTrip(t *testing.T) {
	raw := []byte("ok \x80\x81 <b>&\xff\n")
	r := New("r", "p")
	SetStdout(r, raw)
	SetStderr(r, []byte("clean"))
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	got, err := base64.StdEncoding.DecodeString(back.StdoutBase64)
	if err != nil || !bytes.Equal(got, raw) {
		t.Errorf("stdout_base64 decodes to %q, %v; want %q", got, err, raw)
	}
	if !strings.Contains(back.Stdout, "\uFFFD") || !strings.HasPrefix(back.Stdout, "ok ") {
		t.Errorf("stdout text = %q, want U+FFFD replacements", back.Stdout)
	}
	if back.Stderr != "clean" || back.StderrBase64 != "" {
		t.Errorf("stderr = %q, base64 %q; want clean text and no base64", back.Stderr, back.StderrBase64)
	}
}

func TestNoHTMLEscaping(t *testing.T) {
	r := New("r", "p")
	SetStdout(r, []byte("<script>a && b</script>"))
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"stdout":"<script>a && b</script>"`) {
		t.Errorf("HTML characters escaped: %s", buf.String())
	}
}

type countWriter struct {
	writes, largest int
	bytes           int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.writes++
	w.largest = max(w.largest, len(p))
	w.bytes += int64(len(p))
	return len(p), nil
}

// TestWriteJSONOneWrite: a result up to the write buffer, captured bytes
// included, leaves in one Write.
func TestWriteJSONOneWrite(t *testing.T) {
	var w countWriter
	r := New("r", "p")
	SetStdout(r, bytes.Repeat([]byte("a\n"), 1000))
	if err := r.WriteJSON(&w); err != nil || w.writes != 1 {
		t.Errorf("WriteJSON made %d writes, err %v; want one write", w.writes, err)
	}
}

// TestWriteJSONNoCopy: writing a result with a large captured output
// allocates a small, fixed amount, not a copy of the output (valid UTF-8
// and not, where the text and base64 forms are made on the fly).
func TestWriteJSONNoCopy(t *testing.T) {
	const size = 32 << 20
	valid := bytes.Repeat([]byte("line \"quoted\" \u2028 ü\n"), size/24)
	invalid := make([]byte, size)
	for i := range invalid {
		invalid[i] = byte(i * 7)
	}
	for name, b := range map[string][]byte{"valid UTF-8": valid, "invalid UTF-8": invalid} {
		r := New("r", "p")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		SetStdout(r, b)
		SetStderr(r, b)
		var w countWriter
		if err := r.WriteJSON(&w); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s: SetStdout, SetStderr and WriteJSON of 2 x %d bytes allocated %d bytes, want under 1 MiB", name, size, alloc)
		}
		if w.bytes < 2*size {
			t.Errorf("%s: wrote %d bytes, want at least %d", name, w.bytes, 2*size)
		}
	}
}

// TestSetStdoutShares: SetStdout keeps the bytes, not a copy; the text
// field shares them when they are valid UTF-8 and is empty otherwise,
// StdoutBytes returning them either way.
func TestSetStdoutShares(t *testing.T) {
	r := New("r", "p")
	b := []byte("hello\n")
	SetStdout(r, b)
	if r.Stdout != "hello\n" || unsafe.StringData(r.Stdout) != &b[0] || r.StdoutBase64 != "" {
		t.Errorf("valid UTF-8: Stdout %q (shared %v), base64 %q", r.Stdout, unsafe.StringData(r.Stdout) == &b[0], r.StdoutBase64)
	}
	bad := []byte("a\xffb")
	SetStderr(r, bad)
	if r.Stderr != "" || r.StderrBase64 != "" || &r.StderrBytes()[0] != &bad[0] {
		t.Errorf("invalid UTF-8: Stderr %q, base64 %q, StderrBytes %q", r.Stderr, r.StderrBase64, r.StderrBytes())
	}
	var back Result
	if err := json.Unmarshal(jsonOf(t, r), &back); err != nil {
		t.Fatal(err)
	}
	if string(back.StdoutBytes()) != "hello\n" || !bytes.Equal(back.StderrBytes(), bad) {
		t.Errorf("decoded: StdoutBytes %q, StderrBytes %q", back.StdoutBytes(), back.StderrBytes())
	}
}

func jsonOf(t *testing.T, r *Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestErrnoName(t *testing.T) {
	for e, want := range map[syscall.Errno]string{
		syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.EACCES: "EACCES",
		syscall.ENOSYS: "ENOSYS", syscall.EINVAL: "EINVAL", syscall.EBUSY: "EBUSY",
		syscall.Errno(4000): "errno 4000",
	} {
		if got := ErrnoName(e); got != want {
			t.Errorf("ErrnoName(%d) = %q, want %q", e, got, want)
		}
	}
}

func TestStepError(t *testing.T) {
	err := fmt.Errorf("pivot_root /tmp/root: %w", &os.SyscallError{Syscall: "pivot_root", Err: syscall.EPERM})
	e := StepError("pivot_root", err)
	if e.Step != "pivot_root" || e.Errno != "EPERM" || e.Message != err.Error() {
		t.Errorf("StepError = %+v", e)
	}
	if !errors.Is(e, syscall.EPERM) {
		t.Errorf("StepError(%v) does not unwrap to EPERM", err)
	}
	e = StepError("policy", errors.New("unknown key \"foo\""))
	if e.Errno != "" {
		t.Errorf("non-syscall error got errno %q", e.Errno)
	}
	if got := e.Error(); got != `policy: unknown key "foo"` {
		t.Errorf("Error() = %q", got)
	}
	// The innermost step names the failure: wrapping again keeps it.
	inner := StepError("mount /tmp", syscall.ENOSPC)
	if got := StepError("setup", fmt.Errorf("init: %w", inner)); got != inner {
		t.Errorf("StepError over a step error = %+v, want the inner %+v", got, inner)
	}
}
