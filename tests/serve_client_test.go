package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestServeClient: nsbox run --server (and NSBOX_SERVER) prints what a
// local run of the same program prints, byte for byte, with the same exit
// code, in plain mode; in --json mode the result is the same but for its
// id and measurements. Flags of a local run only are refused.
func TestServeClient(t *testing.T) {
	needRoot(t)
	s := startServe(t, "")
	s.ready(t)
	server := "unix:" + s.sock
	programs := []string{
		"print(6 * 7)",
		"import sys\nprint('out')\nprint('err', file=sys.stderr)\nraise SystemExit(3)",
		"raise ValueError('bad <value> é')",
		"import time\ntime.sleep(5)",
		"import socket",
		"print('x' * 100000)",
		"import sys\nsys.stdout.buffer.write(bytes(range(256)))",
	}
	for i, code := range programs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			args := []string{"run", "--timeout", "1s", "--output-limit", "64KiB", "--label", "k=v", "-c", code}
			local := nsbox(t, run{args: args})
			served := nsbox(t, run{args: append([]string{"run", "--server", server}, args[1:]...)})
			if local.exit != served.exit || !bytes.Equal(local.stdout, served.stdout) || !bytes.Equal(local.stderr, served.stderr) {
				t.Errorf("local: exit %d stdout %q stderr %q\nserved: exit %d stdout %q stderr %q",
					local.exit, head(local.stdout), local.stderr, served.exit, head(served.stdout), served.stderr)
			}
			jl := nsbox(t, run{args: append([]string{"run", "--json"}, args[1:]...)})
			js := nsbox(t, run{args: append([]string{"run", "--json"}, args[1:]...), env: []string{"NSBOX_SERVER=" + server}})
			var rl, rs result.Result
			if json.Unmarshal(jl.stdout, &rl) != nil || json.Unmarshal(js.stdout, &rs) != nil {
				t.Fatalf("--json: not results:\n%s\n%s", jl.stdout, js.stderr)
			}
			if jl.exit != js.exit || rl.Status != rs.Status || rl.Stdout != rs.Stdout || rl.Stderr != rs.Stderr || rl.Reason != rs.Reason || rs.ID == rl.ID {
				t.Errorf("--json local %d %+v\nserved %d %+v", jl.exit, rl, js.exit, rs)
			}
		})
	}
	if o := nsbox(t, run{args: []string{"run", "--server", server, "--workspace", t.TempDir(), "-c", "1"}}); o.exit != result.ExitSandboxError || !bytes.Contains(o.stderr, []byte("--workspace is for a local run")) {
		t.Errorf("--workspace with --server: exit %d %s", o.exit, o.stderr)
	}
	s.stopAndWait(t)
	s.nothingLeft(t)
}
