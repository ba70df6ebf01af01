package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/result"
)

// maxrssVia is the parent the supervisor's peak is measured from: GNU
// time, a small C program, which writes its child's ru_maxrss (KiB) to a
// file. The parent must be small: a child's maxrss starts from the
// high-water mark of the address space it was forked from (and exec keeps
// it), and this test binary, built with -race and linking the service's
// dependencies, is large enough itself to hide the supervisor's peak.
func maxrssVia(t *testing.T, file string) []string {
	t.Helper()
	const time = "/usr/bin/time"
	if _, err := os.Stat(time); err != nil {
		mustwork.Skip(t, "GNU time is missing (apt-get install time; make deps installs it): %v", err)
	}
	return []string{time, "-f", "%M", "-o", file}
}

// supervisorSlack is what the supervisor may use beyond the output it
// must hold: the Go runtime and SQLite, its read and write buffers, the
// heads the audit log keeps, and the program and init it reaped, which
// ru_maxrss counts too (it is the largest of the process and its reaped
// descendants, not their sum).
const supervisorSlack = 32 << 20

// TestSupervisorMemoryBounded floods both streams past a 64 MiB cap and
// checks the supervisor's peak resident memory: the supervisor runs
// outside the run's cgroup, so only its own design bounds it. In plain
// mode the output passes through and only heads are kept: the peak is the
// slack alone. With --json the result holds the output once: the cap per
// stream plus the slack, never the copies that building and encoding the
// result used to make.
func TestSupervisorMemoryBounded(t *testing.T) {
	needRoot(t)
	const outCap = 64 << 20
	policy := filepath.Join(t.TempDir(), "cap64.toml")
	if err := os.WriteFile(policy, []byte("extends = \"default\"\n[limits]\noutput_limit = \"64MiB\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// cap + 1 MiB to each stream in 1 MiB writes: bounded, and quick.
	code := fmt.Sprintf(`
import sys
chunk = b"x" * (1 << 20)
for _ in range(%d):
    sys.stdout.buffer.write(chunk)
    sys.stderr.buffer.write(chunk)
`, outCap>>20+1)
	for _, tc := range []struct {
		mode  string
		args  []string
		bound int64
	}{
		{"plain", nil, supervisorSlack},
		{"json", []string{"--json"}, 2*outCap + supervisorSlack},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			rssFile := filepath.Join(t.TempDir(), "maxrss")
			args := append(append([]string{"run", "--policy", policy}, tc.args...), "-c", code)
			o := nsbox(t, run{args: args, via: maxrssVia(t, rssFile)})
			b, err := os.ReadFile(rssFile)
			if err != nil {
				t.Fatalf("no maxrss from time (exit %d): %v\nstderr: %.2000s", o.exit, err, o.stderr)
			}
			// The last field: time puts "Command exited with non-zero
			// status N" first when the status is not 0.
			f := strings.Fields(string(b))
			if len(f) == 0 {
				t.Fatalf("empty maxrss file from time (exit %d)\nstderr: %.2000s", o.exit, o.stderr)
			}
			kib, err := strconv.ParseInt(f[len(f)-1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if o.exit != result.ExitKilled {
				t.Fatalf("exit %d, want %d (output_limit)\nstderr: %.2000s", o.exit, result.ExitKilled, o.stderr)
			}
			if tc.mode == "json" {
				o.wantStatus(t, result.StatusOutputLimit)
				if len(o.res.StdoutBytes()) != outCap || !o.res.StdoutTruncated {
					t.Errorf("stdout %d bytes, truncated %v; want exactly the cap, truncated", len(o.res.StdoutBytes()), o.res.StdoutTruncated)
				}
			} else if len(o.stdout) != outCap {
				t.Errorf("plain mode passed %d bytes of stdout through, want the cap, %d", len(o.stdout), outCap)
			}
			t.Logf("%s, both streams past a %d MiB cap: nsbox peak RSS %.1f MiB (bound %d MiB)",
				tc.mode, outCap>>20, float64(kib)/1024, tc.bound>>20)
			if kib<<10 > tc.bound {
				t.Errorf("nsbox peak RSS %.1f MiB, want at most %d MiB", float64(kib)/1024, tc.bound>>20)
			}
			o.noLeftovers(t)
		})
	}
}
