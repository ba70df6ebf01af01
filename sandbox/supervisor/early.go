package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// The early end of a warm sandbox's run. A run ends when its program
// has exited; the kernel then still frees the program's memory before
// its parent (the reaper) can wait for it, and the reaper's own exit
// tears the namespaces down. For an interpreter holding pandas that is
// milliseconds, more than the program itself ran, and a service's caller
// waits for none of it. So a warm sandbox, whose program's process is
// known from the moment the runner said ready, ends its run as soon as:
//
//   - the program's stdout, stderr and report pipes are at their end
//     (every writer closed them: the runner does, right before it exits;
//     a process the program left behind that holds one keeps the run in
//     the ordinary path), so the output is whole; and
//   - the kernel says the program is exiting and its exit status is
//     final: /proc/PID/stat, opened when the runner was ready (so a
//     reused pid can never be read), shows PF_EXITING and no memory map
//     (do_exit sets the exit code before it releases the mm), and its
//     exit_code field is that status; or, for a program already reaped,
//     the reaper's message on its exit pipe, which it writes before its
//     own exit tears the namespaces down. Only a normal exit takes this
//     path; a death by signal waits for the init, as the classification
//     of a SIGKILL needs the namespace's CPU time.
//
// The teardown then waits for the init (the reaper reports the same
// status: a difference is reported as the teardown's error, and counted
// by the service), so nothing of the run outlives it.

// earlyBound is how long, after the pipes' end, the kernel may take to
// show the program exiting; past it the run waits for the reaper.
const earlyBound = 5 * time.Millisecond

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h).
const pfExiting = 0x4

// openProgramStat opens /proc/PID/stat of the init's only child, the
// program's process (the runner, exec'd by the setup init), or returns
// nil when it cannot be told apart.
func openProgramStat(initPID int) *os.File {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", initPID))
	var kids []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		return nil
	}
	f, err := os.Open("/proc/" + kids[0] + "/stat")
	if err != nil {
		return nil
	}
	return f
}

// exitingStatus reads stat (openProgramStat's) and returns the program's
// wait status once it is final (see above); gone when the process has
// been reaped already.
func exitingStatus(stat *os.File) (ws syscall.WaitStatus, ok, gone bool) {
	var buf [1024]byte
	n, err := stat.ReadAt(buf[:], 0)
	if n == 0 {
		return 0, false, errors.Is(err, syscall.ESRCH)
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	// Fields from the third (state) on; flags is the 9th, vsize the
	// 23rd, exit_code the 52nd (proc(5)).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 50 {
		return 0, false, false
	}
	flags, err1 := strconv.ParseUint(f[9-3], 10, 64)
	vsize, err2 := strconv.ParseUint(f[23-3], 10, 64)
	code, err3 := strconv.ParseInt(f[52-3], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil || flags&pfExiting == 0 || vsize != 0 {
		return 0, false, false
	}
	return syscall.WaitStatus(code), true, false
}

// waitEarly waits for the early end of a warm run (see above): true and
// the program's wait status when it came, false when the init exited
// first or the program's end cannot be told early; the caller then waits
// for the init.
func (sb *Sandbox) waitEarly(readers *sync.WaitGroup) (syscall.WaitStatus, bool) {
	l := sb.l
	outDone := make(chan struct{})
	go func() {
		readers.Wait()
		sb.rep.done.Wait()
		close(outDone)
	}()
	select {
	case <-l.exited:
		return 0, false
	case <-outDone:
	}
	deadline := time.Now().Add(earlyBound)
	msg := l.exitMessage()
	for {
		ws, ok, _ := exitingStatus(sb.prog)
		if ok {
			return ws, ws.Exited()
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		select {
		case <-l.exited:
			return 0, false
		case <-msg:
			// Reaped already: the reaper's own report, written before
			// its exit tears the namespaces down. No message (the reaper
			// was killed: a stop, the OOM killer) or another kind is
			// told by the init's end, as ever.
			if l.msgErr != nil || len(l.msg) == 0 || l.msg[0] != spec.Exit[0] {
				return 0, false
			}
			ws, err := l.programExit()
			return ws, err == nil && ws.Exited()
		case <-time.After(50 * time.Microsecond):
		}
	}
}

// confirmEarly waits for the init after an early end and compares the
// reaper's report of the program's end with the status the run ended
// with. The init exits once the reaper has reaped the program; a bound
// keeps a teardown from hanging on a kernel that takes long: the cleanup
// stack then kills what is left, as after any run.
func (sb *Sandbox) confirmEarly() error {
	select {
	case <-sb.l.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the sandbox init had not exited 10s after its program's early end")
	}
	ws, err := sb.l.programExit()
	switch {
	case err != nil:
		return fmt.Errorf("after the program's early end: %w", err)
	case ws != sb.earlyWS:
		return fmt.Errorf("bug: the run ended with wait status %#x read in /proc, the reaper reports %#x", uint32(sb.earlyWS), uint32(ws))
	}
	return nil
}
