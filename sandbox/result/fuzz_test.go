package result

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// Bits of FuzzResult's flags argument: which optional parts the Result has.
const (
	fzHasExit = 1 << iota
	fzHasSignal
	fzHasCPU
	fzHasPeak
	fzHasLimits
	fzHasCgroupLimits
	fzHasSandbox
	fzNilNamespaces
	fzHasError
	fzStdoutTruncated
	fzStderrTruncated
	fzRawStatus // use statusRaw instead of one of Statuses()
)

// FuzzResult builds a Result from fuzzed fields, writes it with WriteJSON and
// checks the encoding: one object and one newline, a strict round trip, the
// base64 side fields, no HTML escaping, and the process exit code range.
func FuzzResult(f *testing.F) {
	f.Add(uint16(fzHasExit|fzHasLimits|fzHasCgroupLimits|fzHasSandbox), uint8(0), "", "r1", "default", "", "",
		0, 0, []byte("hello\n"), []byte(""), int64(12), int64(5), int64(1<<20), 0.5,
		uint8(0), "", "", "", 0, 0, "user,mount,pid", "v2", "strict", 3, "", "", "")
	f.Add(uint16(fzHasSignal|fzHasLimits|fzHasSandbox|fzNilNamespaces), uint8(2), "", "r2", "strict", "wall clock 2s", LimitWallTime,
		0, 9, []byte("\xff\xfe<a&b>"), []byte("\xc3\x28 err"), int64(2000), int64(0), int64(0), 0.0,
		uint8(0), "", "", "", 0, 0, "", "none", "none", 0, "", "", "")
	f.Add(uint16(fzHasExit|fzHasLimits), uint8(5), "", "r3", "default", "import of os refused", "",
		1, 0, []byte(""), []byte("Traceback\n"), int64(3), int64(0), int64(0), 0.0,
		uint8(2), ViolationImport, "os", "import of <os> & \u2028 refused", 1, 0, "", "", "", 0, "", "", "")
	f.Add(uint16(fzHasError|fzRawStatus), uint8(7), "sandbox_error", "r4", "", "", "",
		0, 0, []byte(nil), []byte(nil), int64(0), int64(0), int64(0), 0.0,
		uint8(0), "", "", "", 0, 0, "", "", "", 0, "pivot_root", "EPERM", "operation not permitted")
	f.Add(uint16(fzHasExit|fzRawStatus), uint8(0), "bogus\xff", "\xed\xa0\x80", "p\x00", "\x7f", "memory",
		-1, 0, []byte("\xf4\x90\x80\x80"), []byte("\xe2\x82"), int64(-1), int64(math.MinInt64), int64(math.MaxInt64), -0.0,
		uint8(255), "\xff", "</script>", "&amp;", -1, math.MaxInt32, ",,", "\xff", "\\u003c", -1, "\\", "\"", "\n")

	f.Fuzz(func(t *testing.T, flags uint16, statusSel uint8, statusRaw, id, policy, reason, limit string,
		exitCode, signal int, stdout, stderr []byte, durationMS, cpuMS, peak int64, cpus float64,
		nViol uint8, vKind, vName, vDetail string, vLine, vCol int,
		namespaces, cgroup, seccomp string, landlock int, errStep, errErrno, errMsg string) {

		// Any int: ProcessExitCode must keep even impossible values in
		// 0..255 (the kept crasher has exit code -1).
		// A non-finite CPU quota is not representable in JSON; policies
		// never produce one.
		if math.IsNaN(cpus) || math.IsInf(cpus, 0) {
			cpus = 1
		}

		r := New(id, policy)
		statuses := Statuses()
		r.Status = statuses[int(statusSel)%len(statuses)]
		if flags&fzRawStatus != 0 {
			r.Status = Status(statusRaw)
		}
		r.Reason, r.Limit = reason, limit
		if flags&fzHasExit != 0 {
			r.ExitCode = &exitCode
		}
		if flags&fzHasSignal != 0 {
			r.Signal = &signal
		}
		SetStdout(r, stdout)
		SetStderr(r, stderr)
		r.StdoutTruncated = flags&fzStdoutTruncated != 0
		r.StderrTruncated = flags&fzStderrTruncated != 0
		r.DurationMS = durationMS
		if flags&fzHasCPU != 0 {
			r.CPUMS = Int64(cpuMS)
		}
		if flags&fzHasPeak != 0 {
			r.PeakMemoryBytes = Int64(peak)
		}
		if flags&fzHasLimits != 0 {
			r.Limits = &Limits{
				TimeoutMS: durationMS, CPUTimeMS: cpuMS, OutputBytes: peak,
				OpenFiles: int64(vLine), FileSizeBytes: -peak, StackBytes: cpuMS ^ peak,
				TmpBytes: durationMS + 1, ShmBytes: int64(vCol),
			}
			if flags&fzHasCgroupLimits != 0 {
				r.Limits.MemoryBytes = Int64(peak)
				r.Limits.Pids = Int64(int64(landlock))
				r.Limits.CPUs = Float64(cpus)
			}
		}
		if flags&fzHasSandbox != 0 {
			r.Sandbox = &Sandbox{Cgroup: cgroup, Seccomp: seccomp, LandlockABI: landlock}
			if flags&fzNilNamespaces == 0 {
				r.Sandbox.Namespaces = strings.Split(namespaces, ",")
			}
		}
		for i := 0; i < int(nViol%8); i++ {
			r.Violations = append(r.Violations, Violation{
				Kind: vKind, Name: vName + strings.Repeat("<", i), Line: vLine + i, Col: vCol - i, Detail: vDetail,
			})
		}
		if flags&fzHasError != 0 {
			r.Error = &SandboxError{Step: errStep, Errno: errErrno, Message: errMsg}
		}

		// The exit code of `nsbox run` must be a valid process exit code
		// whatever the status.
		if code := r.ProcessExitCode(); code < 0 || code > 255 {
			t.Fatalf("status %q exit %v signal %v: ProcessExitCode() = %d, outside 0..255",
				r.Status, deref(r.ExitCode), deref(r.Signal), code)
		}

		before := cloneResult(r)
		var buf bytes.Buffer
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if !reflect.DeepEqual(r, before) {
			t.Fatalf("WriteJSON modified its receiver:\n got %#v\nwant %#v", r, before)
		}
		out := buf.Bytes()

		// Framing: one object, then exactly one newline, at the end.
		if !bytes.HasSuffix(out, []byte("}\n")) || bytes.Count(out, []byte("\n")) != 1 {
			t.Fatalf("output is not one line ending in a newline: %q", out)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		var got Result
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("decode: %v\n%s", err, out)
		}
		if dec.More() {
			t.Fatalf("more than one JSON value: %q", out)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(out, &raw); err != nil {
			t.Fatalf("not a JSON object: %v", err)
		}

		// Byte for byte what encoding/json writes for the whole object
		// with the streams as EncodeText's strings: the streamed
		// encoding of the captured bytes changes nothing but memory.
		if ref := referenceJSON(t, r); !bytes.Equal(out, ref) {
			t.Fatalf("WriteJSON differs from encoding/json:\n got %s\nwant %s", out, ref)
		}

		// Round trip: what was written is what WriteJSON promises, with
		// invalid UTF-8 in free-text fields replaced as encoding/json does.
		want := expected(r)
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("round trip differs:\n got %#v\nwant %#v\njson %s", &got, want, out)
		}

		// stdout_base64 / stderr_base64: present iff the bytes are not
		// valid UTF-8, and then exactly the bytes.
		checkStream(t, raw, "stdout", stdout, got.Stdout, got.StdoutBase64)
		checkStream(t, raw, "stderr", stderr, got.Stderr, got.StderrBase64)

		// No HTML escaping: every <, > and & of the strings is written as
		// itself, and nothing else in the object can contain one.
		text := strings.Join(stringsOf(want), "")
		for _, c := range []string{"<", ">", "&"} {
			if n, w := bytes.Count(out, []byte(c)), strings.Count(text, c); n != w {
				t.Fatalf("%q appears %d times in the output, %d in the strings (HTML escaping?): %s", c, n, w, out)
			}
		}
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if n, w := bytes.Count(out, []byte(esc)), strings.Count(text, esc); n > w {
				t.Fatalf("output has HTML escape %s: %s", esc, out)
			}
		}
	})
}

// checkStream checks one captured stream's text and base64 fields.
func checkStream(t *testing.T, raw map[string]json.RawMessage, name string, b []byte, text, b64 string) {
	t.Helper()
	_, present := raw[name+"_base64"]
	if valid := utf8.Valid(b); present == valid {
		t.Fatalf("%s: %s_base64 present=%v for bytes %q (valid UTF-8 %v)", name, name, present, b, valid)
	}
	if !utf8.ValidString(text) {
		t.Fatalf("%s: text %q is not valid UTF-8", name, text)
	}
	if utf8.Valid(b) {
		if text != string(b) {
			t.Fatalf("%s: text %q, want %q", name, text, b)
		}
		return
	}
	if want := strings.ToValidUTF8(string(b), "\uFFFD"); text != want {
		t.Fatalf("%s: text %q, want %q", name, text, want)
	}
	dec, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("%s_base64 %q: %v", name, b64, err)
	}
	if !bytes.Equal(dec, b) {
		t.Fatalf("%s_base64 decodes to %q, want %q", name, dec, b)
	}
}

// cloneResult copies r deeply enough to notice WriteJSON changing it.
func cloneResult(r *Result) *Result {
	c := *r
	if r.Limits != nil {
		l := *r.Limits
		c.Limits = &l
	}
	if r.Sandbox != nil {
		s := *r.Sandbox
		if r.Sandbox.Namespaces != nil {
			s.Namespaces = append([]string{}, r.Sandbox.Namespaces...)
		}
		c.Sandbox = &s
	}
	if r.Violations != nil {
		c.Violations = append([]Violation{}, r.Violations...)
	}
	if r.LimitsReached != nil {
		c.LimitsReached = append([]string{}, r.LimitsReached...)
	}
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	return &c
}

// jsonString is s as encoding/json writes it: each byte of an invalid UTF-8
// sequence becomes U+FFFD.
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(c) // RuneError for an invalid byte
		i += size
	}
	return b.String()
}

// referenceJSON is r as WriteJSON wrote it before it streamed the
// captured bytes: a Result without recorded bytes, whose streams are
// EncodeText's strings, goes whole through encoding/json.
func referenceJSON(t *testing.T, r *Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := withStreamFields(r).WriteJSON(&buf); err != nil {
		t.Fatalf("encode reference: %v", err)
	}
	return buf.Bytes()
}

// withStreamFields is a copy of r with the bytes given to SetStdout and
// SetStderr in the text and base64 fields, as EncodeText makes them.
func withStreamFields(r *Result) *Result {
	w := cloneResult(r)
	if w.stdout != nil {
		w.Stdout, w.StdoutBase64 = EncodeText(w.stdout)
	}
	if w.stderr != nil {
		w.Stderr, w.StderrBase64 = EncodeText(w.stderr)
	}
	w.stdout, w.stderr = nil, nil
	return w
}

// expected is the Result a decoder must get back from r.WriteJSON.
func expected(r *Result) *Result {
	w := withStreamFields(r)
	if w.Schema == 0 {
		w.Schema = SchemaVersion
	}
	w.ID, w.Status, w.Reason, w.Limit = jsonString(w.ID), Status(jsonString(string(w.Status))), jsonString(w.Reason), jsonString(w.Limit)
	w.Policy = jsonString(w.Policy)
	if w.Violations == nil {
		w.Violations = []Violation{}
	}
	if w.LimitsReached == nil {
		w.LimitsReached = []string{}
	}
	for i := range w.Violations {
		v := &w.Violations[i]
		v.Kind, v.Name, v.Detail = jsonString(v.Kind), jsonString(v.Name), jsonString(v.Detail)
	}
	if w.Sandbox != nil {
		if w.Sandbox.Namespaces == nil {
			w.Sandbox.Namespaces = []string{}
		}
		for i, n := range w.Sandbox.Namespaces {
			w.Sandbox.Namespaces[i] = jsonString(n)
		}
		w.Sandbox.Cgroup, w.Sandbox.Seccomp = jsonString(w.Sandbox.Cgroup), jsonString(w.Sandbox.Seccomp)
	}
	if w.Error != nil {
		w.Error.Step, w.Error.Errno, w.Error.Message = jsonString(w.Error.Step), jsonString(w.Error.Errno), jsonString(w.Error.Message)
	}
	return w
}

// stringsOf lists every string field of r, for counting characters.
func stringsOf(r *Result) []string {
	s := []string{r.ID, string(r.Status), r.Reason, r.Limit, r.Stdout, r.StdoutBase64,
		r.Stderr, r.StderrBase64, r.Policy}
	for _, v := range r.Violations {
		s = append(s, v.Kind, v.Name, v.Detail)
	}
	if r.Sandbox != nil {
		s = append(s, r.Sandbox.Namespaces...)
		s = append(s, r.Sandbox.Cgroup, r.Sandbox.Seccomp)
	}
	if r.Error != nil {
		s = append(s, r.Error.Step, r.Error.Errno, r.Error.Message)
	}
	return s
}
