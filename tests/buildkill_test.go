package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledBuildLeavesNoProcess: `nsbox rootfs build` SIGKILLed while it
// compiles bytecode (compileall with worker processes) leaves no process
// behind, and the next build into the same directory succeeds.
func TestKilledBuildLeavesNoProcess(t *testing.T) {
	needRoot(t)
	mustHave(t, "/usr/bin/python3.11")
	out := filepath.Join(t.TempDir(), "root")
	if left := killBuildCompiling(t, out); len(left) > 0 {
		t.Errorf("processes of the killed build still running: %v", left)
	}
	if o, err := exec.Command(nsboxBin, "rootfs", "build", "--json", "--python", "/usr/bin/python3.11", "--out", out).CombinedOutput(); err != nil {
		t.Errorf("the next build into %s: %v\n%s", out, err, o)
	}
}

// killBuildCompiling starts `nsbox rootfs build` into out, SIGKILLs it
// while it compiles bytecode (compileall with worker processes) and
// returns the processes of the build still running shortly after, which
// it then kills (the test's own leftovers).
func killBuildCompiling(t *testing.T, out string) []string {
	t.Helper()
	cmd := exec.Command(nsboxBin, "rootfs", "build", "--json", "--python", "/usr/bin/python3.11", "--out", out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	compiling := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"compile bytecode"`) {
			compiling = true
			break
		}
	}
	if !compiling {
		cmd.Wait()
		t.Fatalf("the build never reached its bytecode step")
	}
	time.Sleep(100 * time.Millisecond) // let compileall start its workers
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	// Every process of the build names its directory (OUT.tmp-...).
	deadline := time.Now().Add(300 * time.Millisecond) // compileall alone would still run for about a second
	var left []string
	for {
		left = processesMentioning(t, out+".tmp-")
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range left {
		if n, err := atoi(pid); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
	return left
}

// processesMentioning lists the pids whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, d.Name())
		}
	}
	return pids
}
