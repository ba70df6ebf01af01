package tests

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestLockedAuditLogRefusesRun: while another process holds the audit
// log's write lock, a run waits a bounded time for its row, then is
// refused as sandbox_error of step audit (exit 125), never as a timeout:
// the program never ran, so its wall clock never started.
func TestLockedAuditLogRefusesRun(t *testing.T) {
	needRoot(t)
	mustHave(t, "python3")
	t.Parallel() // waits for the lock's bound; other tests run meanwhile
	state := t.TempDir()
	db := filepath.Join(state, "audit.db")
	if o := nsbox(t, run{state: state, args: []string{"run", "--audit-db", db, "-c", "pass"}}); o.exit != 0 {
		t.Fatalf("first run: exit %d: %s", o.exit, o.stderr)
	}
	holdAuditLock(t, db)

	o := nsbox(t, run{state: state, args: []string{"run", "--json", "--timeout", "2s", "--audit-db", db, "-c", "print(1)"}})
	o.wantStatus(t, result.StatusSandboxError)
	if o.exit != result.ExitSandboxError || o.res.Error == nil || o.res.Error.Step != "audit" || !strings.Contains(o.res.Error.Message, "locked") {
		t.Errorf("exit %d, error %+v; want 125, step audit, the lock named", o.exit, o.res.Error)
	}
	if o.res.Stdout != "" || o.res.ExitCode != nil {
		t.Errorf("the program ran: stdout %q, exit code %v", o.res.Stdout, o.res.ExitCode)
	}
	if o.elapsed > 45*time.Second {
		t.Errorf("refused after %v, want the documented bound (30 s) and a little", o.elapsed)
	}
	o.noLeftovers(t)
}

// holdAuditLock holds the write lock of the audit log db from another
// process, for longer than nsbox waits for it, and returns its release;
// the test's cleanup releases it too.
func holdAuditLock(t *testing.T, db string) (release func()) {
	t.Helper()
	holder := exec.Command("python3", "-c", `import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)`, db)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { holder.Process.Kill(); holder.Wait() }) }
	t.Cleanup(release)
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	return release
}
