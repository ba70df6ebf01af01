package supervisor

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExitingStatus checks exitingStatus against real processes: none
// while a process runs, its exit status once it has exited (a zombie,
// PF_EXITING and no mm, as during its exit).
func TestExitingStatus(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stat, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	defer stat.Close()
	if ws, ok, gone := exitingStatus(stat); ok || gone {
		t.Errorf("a running process: status %#x %v, gone %v", uint32(ws), ok, gone)
	}
	stdin.Close()
	// Not reaped (no Wait yet): a zombie, which is how the kernel shows it
	// from its exit on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit")
		}
		time.Sleep(time.Millisecond)
	}
	ws, ok, _ := exitingStatus(stat)
	if !ok || !ws.Exited() || ws.ExitStatus() != 3 {
		t.Errorf("an exited process: %#x %v; want exit 3", uint32(ws), ok)
	}
	cmd.Wait()
	if _, ok, gone := exitingStatus(stat); ok || !gone {
		t.Errorf("a reaped process: exiting %v, gone %v; want gone", ok, gone)
	}
}
