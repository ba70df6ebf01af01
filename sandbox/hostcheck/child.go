package hostcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ChildCommand is the hidden command of the nsbox binary that runs one
// probe child (see cmd/nsbox/probe.go). A test binary that passes its own
// path to Probe must dispatch it to ChildMain from TestMain.
const ChildCommand = "hostcheck-probe"

// childTimeout bounds every probe child: a child that hangs (a blocked
// mount, a stuck clone) is killed and reported, never waited for.
const childTimeout = 10 * time.Second

// child is one probe child to start.
type child struct {
	exe       string
	args      []string                   // after ChildCommand: the kind and its arguments
	flags     uintptr                    // clone flags
	files     []*os.File                 // extra files: fd 3, 4, ...
	sysAttrFn func(*syscall.SysProcAttr) // last changes to SysProcAttr (cgroup fd)
}

// run starts the child, waits for it (at most childTimeout) and returns
// its trimmed stdout. A failure carries the child's stderr, which names
// the operation that failed.
func (c child) run() (string, error) {
	if c.exe == "" {
		return "", errors.New("not probed: no nsbox binary to re-execute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.exe, append([]string{ChildCommand}, c.args...)...)
	cmd.Args[0] = "nsbox"
	// Nothing of the host environment is needed, and "/" exists in every
	// mount namespace. GORACE only matters to race-enabled test binaries,
	// whose children would otherwise each sleep a second at exit.
	cmd.Env, cmd.Dir = []string{}, "/"
	if v, ok := os.LookupEnv("GORACE"); ok {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	cmd.ExtraFiles = c.files
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A killed child may leave a grandchild holding the pipes; do not
	// wait for it.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: c.flags,
		// If doctor dies, its children die with it.
		Pdeathsig: syscall.SIGKILL,
	}
	if c.flags&syscall.CLONE_NEWUSER != 0 {
		// Namespace root is the caller's own ids: this works for any
		// caller (a run maps unprivileged ids instead, which only root
		// may do), and keeps the binary executable when it lives in a
		// directory only its owner may search (go test's build dir).
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	if c.sysAttrFn != nil {
		c.sysAttrFn(cmd.SysProcAttr)
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("probe child did not finish within %s", childTimeout)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return "", startError(err)
		}
		var errno syscall.Errno
		if code := exitCode(cmd); code > errnoExitBase && code <= errnoExitBase+maxExitErrno {
			errno = syscall.Errno(code - errnoExitBase)
		}
		return "", &childError{msg: msg, errno: errno}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// exitCode is the child's exit status, or -1 if it did not exit.
func exitCode(cmd *exec.Cmd) int {
	if cmd.ProcessState == nil {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// childError is a probe child's failure: its message, and the errno that
// caused it when there is one (so errors.Is(err, syscall.EPERM) works).
type childError struct {
	msg   string
	errno syscall.Errno
}

func (e *childError) Error() string { return e.msg }

func (e *childError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}

// startError shortens the error of a child that could not be started:
// "fork/exec /path/nsbox: operation not permitted" becomes "start probe
// child (clone, id maps or exec): operation not permitted". Go reports
// all three steps under one name.
func startError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		return fmt.Errorf("start probe child (clone, id maps or exec): %w", pe.Err)
	}
	return err
}
