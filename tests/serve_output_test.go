package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestOutputTruncate: with output_mode = "truncate" a program that writes
// past output_limit finishes with its own status and exit code; --json
// keeps the first half of the cap and the last bytes up to the cap, with
// stdout_truncated; plain mode prints the head, a one-line marker, then
// the tail. stderr is capped on its own.
func TestOutputTruncate(t *testing.T) {
	needRoot(t)
	pol := filepath.Join(t.TempDir(), "trunc.toml")
	if err := os.WriteFile(pol, []byte("extends = \"default\"\n[limits]\noutput_limit = \"1KiB\"\noutput_mode = \"truncate\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// 4000 bytes of numbered lines on stdout, 3000 on stderr, then exit 3.
	code := "import sys\nfor i in range(500):\n    print('%07d' % i)\nsys.stderr.write('e' * 3000)\nraise SystemExit(3)"
	var all strings.Builder
	for i := range 500 {
		fmt.Fprintf(&all, "%07d\n", i)
	}
	want := all.String()[:512] + all.String()[4000-512:]

	o := nsbox(t, run{args: []string{"run", "--json", "--policy", pol, "-c", code}})
	var r result.Result
	if err := json.Unmarshal(o.stdout, &r); err != nil {
		t.Fatalf("not a result: %v\n%s", err, o.stdout)
	}
	if r.Status != result.StatusError || o.exit != 3 || r.Stdout != want || !r.StdoutTruncated ||
		r.Stderr != strings.Repeat("e", 1024) || !r.StderrTruncated {
		t.Errorf("--json: status %s exit %d truncated %v/%v\nstdout %q\nwant   %q\nstderr %d bytes", r.Status, o.exit, r.StdoutTruncated, r.StderrTruncated, r.Stdout, want, len(r.Stderr))
	}

	o = nsbox(t, run{args: []string{"run", "--policy", pol, "-c", code}})
	marker := "[nsbox: 2976 bytes of stdout left out here: output_limit 1024, output_mode truncate]\n"
	if o.exit != 3 || string(o.stdout) != all.String()[:512]+marker+all.String()[4000-512:] {
		t.Errorf("plain: exit %d, stdout %q", o.exit, o.stdout)
	}
	if !strings.HasSuffix(string(o.stderr), strings.Repeat("e", 512)) || !strings.Contains(string(o.stderr), "bytes of stderr left out here") {
		t.Errorf("plain stderr: %q", o.stderr)
	}
}
