package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// maxrssEnv, set to a file path, makes this test binary a small parent
// that runs its arguments, writes their ru_maxrss (KiB) to that file and
// exits as they did (the test binary doubling as a helper, as runc's
// integration tests use theirs as the init). The supervisor's peak must be
// measured from a parent that is not itself big: a child's maxrss starts
// from the high-water mark of the address space it was forked from, and
// this test process holds every output it read.
const maxrssEnv = "NSBOX_TEST_MAXRSS_FILE"

func init() {
	path := os.Getenv(maxrssEnv)
	if path == "" {
		return
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintf(os.Stderr, "maxrss helper: %v\n", err)
		os.Exit(127)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		os.Exit(127)
	}
	if err := os.WriteFile(path, []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "maxrss helper: %v\n", err)
		os.Exit(127)
	}
	os.Exit(cmd.ProcessState.ExitCode())
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
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{"run", "--policy", policy}, tc.args...), "-c", code)
			o := nsbox(t, run{args: args, via: []string{self}, env: []string{maxrssEnv + "=" + rssFile}})
			b, err := os.ReadFile(rssFile)
			if err != nil {
				t.Fatalf("no maxrss from the helper (exit %d): %v\nstderr: %.2000s", o.exit, err, o.stderr)
			}
			kib, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
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
