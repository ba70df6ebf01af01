package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// child is a process a test started. It is killed and reaped when the
// test ends, and every wait on it is bounded.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File
	exited chan struct{} // closed once reaped; then err is set
	err    error
}

// childTimeout bounds every process a test starts.
const childTimeout = 30 * time.Second

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = r
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	ch := &child{cmd: cmd, stdin: w, exited: make(chan struct{})}
	timer := time.AfterFunc(childTimeout, func() { cmd.Process.Kill() })
	go func() {
		ch.err = cmd.Wait()
		timer.Stop()
		close(ch.exited)
	}()
	t.Cleanup(func() {
		w.Close()
		cmd.Process.Kill()
		<-ch.exited
	})
	return ch
}

// release lets a child blocked in `read` go on.
func (ch *child) release() { ch.stdin.Close() }

// wait waits for the child to exit, at most d.
func (ch *child) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-ch.exited:
		return ch.err
	case <-time.After(d):
		t.Fatalf("%v still running after %s", ch.cmd.Args, d)
		return nil
	}
}

// wantKilled checks the child died of SIGKILL.
func (ch *child) wantKilled(t *testing.T) {
	t.Helper()
	err := ch.wait(t, 5*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("%v ended with %v, want SIGKILL", ch.cmd.Args, err)
	}
}
