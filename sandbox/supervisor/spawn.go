package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/initproc"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// InitCommand is the argument that selects the init, in nsbox-init and in
// the nsbox binary (its hidden command, cmd/nsbox/init.go).
const InitCommand = initproc.Command

// cloneFlags are the namespaces every sandbox gets. CLONE_NEWUSER comes
// with the others in one clone(2), so the init holds capabilities only
// over namespaces it owns, never over the host's.
const cloneFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// sysIDMap is ids' map as os/exec wants it.
func sysIDMap(ids *runIDs) []syscall.SysProcIDMap {
	var m []syscall.SysProcIDMap
	for _, e := range ids.idMap() {
		m = append(m, syscall.SysProcIDMap{ContainerID: int(e.Inside), HostID: int(e.Host), Size: 1})
	}
	return m
}

// initEnv is the init's whole environment: nothing of the host's. The
// reaper lives as long as the run, so it keeps little: one P (few
// threads, which on cgroup v2 count in the run's pids limit), and no
// host cgroup files held open to track the CPU limit for GOMAXPROCS.
var initEnv = []string{"GOMAXPROCS=1", "GODEBUG=containermaxprocs=0,updatemaxprocs=0"}

// launch is one started init with the host ends of its pipes.
type launch struct {
	cmd    *exec.Cmd
	sync   int      // host end of the sync socket
	stdin  *os.File // write end: the program's source
	stdout *os.File // read ends
	stderr *os.File
	status *os.File // read end of the reaper's exit pipe
	// listener is the proxy endpoint the init sent (spec.Listener), until
	// the proxy takes it; nil without one.
	listener *os.File
	exited   chan struct{} // closed once the init is reaped; cmd.ProcessState is then set
	err      error         // cmd.Wait's error, once exited is closed

	exitOnce sync.Once // programExit reads the exit pipe once
	exitWS   syscall.WaitStatus
	exitErr  error

	msgOnce sync.Once     // exitMessage starts its reader once
	msgDone chan struct{} // closed once msg and msgErr are set
	msg     []byte        // the reaper's message; empty if it exited without one
	msgErr  error
}

// inherited are the files the init inherits besides stdio and the sync
// socket, in no particular order: files puts them in spec.Layout's.
type inherited struct {
	root, workspace, report *os.File
	tasks                   []*os.File
}

// files returns the init's ExtraFiles, the first becoming descriptor 3:
// the sync socket, then the rest at the numbers fds gives them, the
// reaper's exit pipe last.
func (in inherited) files(sync, status *os.File, fds spec.FDs) ([]*os.File, error) {
	if len(in.tasks) != len(fds.Tasks) {
		return nil, fmt.Errorf("bug: %d tasks files for a layout of %d", len(in.tasks), len(fds.Tasks))
	}
	out := make([]*os.File, fds.Count())
	set := func(fd int, f *os.File) { out[fd-3] = f }
	set(fds.Sync, sync)
	set(fds.Root, in.root)
	set(fds.Workspace, in.workspace)
	set(fds.Report, in.report)
	set(fds.Status, status)
	for i, f := range in.tasks {
		set(fds.Tasks[i], f)
	}
	return out, nil
}

// detachedBind clones the mount of src (not its submounts) into a detached
// mount (open_tree with OPEN_TREE_CLONE) and sets its flags: the root
// read-only, a caller's /workspace writable but noexec, both nosuid and
// nodev. Flags on a detached mount apply before anyone can see it, so
// there is no window where the bind is writable. The init only attaches
// it with move_mount: it never resolves a host path itself, needs no
// search permission on the way (a workspace under /root works), and
// cannot get a writable copy of the read-only root. Needs Linux 5.12
// (mount_setattr).
func detachedBind(src string, writable bool) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open_tree", Path: src, Err: err}
	}
	// The read-only root holds the interpreter and its libraries and must
	// stay executable; the writable one (/workspace) is noexec, so the only
	// code that can be executed is what the root was built from.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if writable {
		attr.Attr_set |= unix.MOUNT_ATTR_NOEXEC
	} else {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "mount_setattr", Path: src, Err: err}
	}
	return os.NewFile(uintptr(fd), src), nil
}

// start re-executes exe as the init in new namespaces, with in at the
// descriptors fds names, as the run's host ids. The init is the reaper
// (PID 1, initproc), which starts the setup init and, at the end, writes
// the program's wait status on the exit pipe whose read end the launch
// keeps. Go's fork code writes the
// uid/gid maps from here before the child execs. On cgroup v2 the init is
// cloned straight into cg (CLONE_INTO_CGROUP, Linux 5.7), so not one
// instruction of it runs outside its limits.
//
// The init is forked, waited for and reaped on one goroutine locked to
// its own thread: PDEATHSIG fires when the thread that forked the init
// exits, not the process, so that thread must outlive the init whichever
// goroutine the run's other steps are on. The goroutine ends after the
// wait without unlocking, which ends its thread too (offMainThread).
//
// The same thread takes the run's init id as its own before the clone
// (becomeOwner): the kernel makes the cloning thread's effective uid the
// owner of the new user namespace, and charges every per-user count of
// the namespace (pending signals, inotify instances and watches, POSIX
// message queue bytes, locked memory, user namespaces, processes) to the
// owner as well as to the user inside. Made by host root, a run would
// spend host root's quotas (a run that queues signals up to the limit
// leaves host root unable to create a POSIX timer); made by the run's own
// id, it spends only its own. The thread keeps its capabilities, which
// writing the maps needs, and nothing else runs on it.
func start(exe string, in inherited, fds spec.FDs, cg *cgroup.Cgroup, ids *runIDs) (*launch, error) {
	sockets, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	childSync := os.NewFile(uintptr(sockets[1]), "sync")
	defer childSync.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		unix.Close(sockets[0])
		return nil, fmt.Errorf("pipe: %w", err)
	}
	defer statusW.Close()
	extra, err := in.files(childSync, statusW, fds)
	if err != nil {
		unix.Close(sockets[0])
		statusR.Close()
		return nil, err
	}

	l := &launch{sync: sockets[0], status: statusR, exited: make(chan struct{})}
	var childEnds []*os.File
	defer func() { closeAll(childEnds...) }()
	pipe := func(childReads bool) (*os.File, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("pipe: %w", err)
		}
		if childReads {
			childEnds = append(childEnds, r)
			return w, nil
		}
		childEnds = append(childEnds, w)
		return r, nil
	}
	if l.stdin, err = pipe(true); err == nil {
		if l.stdout, err = pipe(false); err == nil {
			l.stderr, err = pipe(false)
		}
	}
	if err != nil {
		l.closeHostEnds()
		return nil, err
	}

	exe, release, err := execAbove(exe, append(slices.Clone(childEnds), extra...))
	if err != nil {
		l.closeHostEnds()
		return nil, err
	}
	defer release() // after Start: the child has its copy
	l.cmd = &exec.Cmd{
		Path:       exe,
		Args:       initproc.Argv(fds.Sync, fds.Status),
		Env:        initEnv, // nothing of the host environment reaches the init
		Dir:        "/",
		Stdin:      childEnds[0],
		Stdout:     childEnds[1],
		Stderr:     childEnds[2],
		ExtraFiles: extra, // descriptor 3 on, in spec.Layout's order
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 cloneFlags,
			UidMappings:                sysIDMap(ids),
			GidMappings:                sysIDMap(ids),
			GidMappingsEnableSetgroups: true, // the init clears its groups with setgroups
			// Become inside-root (the run's init id) once the maps are
			// written: host root is unmapped there, and execve as an
			// unmapped uid would leave the init without capabilities.
			Credential: &syscall.Credential{Uid: spec.RootID, Gid: spec.RootID},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if ids.shared {
		// One id to map: the caller, as the program's uid. The init
		// starts as that uid, so it keeps the capabilities it needs
		// over its own namespaces as ambient ones (an execve as a
		// non-zero uid would drop them); it clears them all before the
		// program's execve, as always. Its groups cannot be changed:
		// the outer namespace denies setgroups (an unprivileged gid map
		// requires it).
		attr := l.cmd.SysProcAttr
		attr.Credential, attr.GidMappingsEnableSetgroups = nil, false
		if attr.AmbientCaps, err = allCaps(); err != nil {
			l.closeHostEnds()
			return nil, err
		}
	}
	if cg != nil {
		if fd, ok := cg.FD(); ok {
			l.cmd.SysProcAttr.UseCgroupFD, l.cmd.SysProcAttr.CgroupFD = true, fd
		}
	}
	started := make(chan error, 1)
	go offMainThread(func() {
		if ids.shared {
			// The caller owns the run's namespace: it has no id of
			// its own to charge (SECURITY.md, rootless mode).
		} else if err := becomeOwner(ids.Root); err != nil {
			started <- err
			return
		}
		if err := l.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		l.err = l.cmd.Wait()
		close(l.exited)
	})
	if err := <-started; err != nil {
		l.closeHostEnds()
		return nil, fmt.Errorf("start sandbox init %s: %w", exe, err)
	}
	return l, nil
}

// wait blocks until the init is reaped and returns cmd.Wait's error.
func (l *launch) wait() error {
	<-l.exited
	return l.err
}

// closeHostEnds closes this side's ends of the init's sync socket and
// pipes. It never fails: see cleanup.pushClose.
func (l *launch) closeHostEnds() error {
	if l.sync >= 0 {
		unix.Close(l.sync)
		l.sync = -1
	}
	closeAll(l.stdin, l.stdout, l.stderr, l.status, l.listener)
	return nil
}

// send writes one message on the sync socket.
func (l *launch) send(msg []byte) error {
	if _, err := unix.Write(l.sync, msg); err != nil {
		return fmt.Errorf("write sync socket: %w", err)
	}
	return nil
}

// release sends the spec, then Go, and returns once the program was
// exec'd (see awaitExec). The init reads the spec and attaches itself to
// its cgroup before it reads Go; if it stops there, it may be gone before
// Go is written (EPIPE). What it reported is the better error then, and
// awaitExec still reads it: the init's end is closed, so it cannot block.
func (l *launch) release(sp *spec.Spec, onReady func([]trace.Mark)) error {
	msg, err := spec.Encode(sp)
	if err != nil {
		return result.StepError("spec", err)
	}
	err = l.send(msg)
	if err == nil {
		err = l.send(spec.Go)
	}
	if err != nil && !errors.Is(err, unix.EPIPE) {
		return err
	}
	if werr := l.awaitExec(onReady); werr != nil || err == nil {
		return werr
	}
	return err
}

// errInitDied reports an init that exited or was killed before it
// reported ready.
var errInitDied = &result.SandboxError{Step: "setup", Message: "sandbox init exited before it was ready"}

// awaitExec returns nil once the program was exec'd (Ready, then EOF on the
// close-on-exec sync socket), or the init's error. onReady runs when Ready
// arrives, with the init's step times (Spec.Trace).
func (l *launch) awaitExec(onReady func([]trace.Mark)) error {
	buf := make([]byte, spec.MaxMessage)
	ready, reset := false, false
	for {
		n, err := l.recvSync(buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECONNRESET && !reset {
			// The init exited with a message of ours unread (it failed
			// before reading Go): the kernel reports that once, then
			// hands over what the init sent before it died.
			reset = true
			continue
		}
		if err != nil {
			return fmt.Errorf("read sync socket: %w", err)
		}
		if n == 0 && ready {
			return nil
		}
		if n == 0 {
			return errInitDied
		}
		steps, isReady, err := spec.DecodeReady(buf[:n])
		switch {
		case !ready && isReady && err != nil:
			return err
		case !ready && isReady:
			ready = true
			onReady(steps)
		default:
			ie, err := spec.DecodeError(buf[:n])
			if err != nil {
				return err
			}
			return ie
		}
	}
}

// exitMessage reads the reaper's one message on the exit pipe, in the
// background, once; the channel is closed when l.msg holds it (empty when
// the reaper exited without one). The reaper writes it as soon as it has
// reaped the program, before its own exit tears the namespaces down: an
// Exit message is a single write of a few bytes, atomic on a pipe, so one
// read has it whole; anything else is read to the end.
func (l *launch) exitMessage() <-chan struct{} {
	l.msgOnce.Do(func() {
		l.msgDone = make(chan struct{})
		go func() {
			defer close(l.msgDone)
			buf := make([]byte, 64)
			n, err := l.status.Read(buf)
			l.msg = buf[:n]
			if n > 0 && l.msg[0] == spec.Exit[0] {
				return
			}
			if err != nil && !errors.Is(err, io.EOF) {
				l.msgErr = err
				return
			}
			if n > 0 {
				rest, err := io.ReadAll(io.LimitReader(l.status, spec.MaxMessage-int64(n)))
				l.msg, l.msgErr = append(l.msg, rest...), err
			}
		}()
	})
	return l.msgDone
}

// programExit returns how the program ended, once the init was reaped:
// the wait status the reaper wrote on its exit pipe. With no message the
// reaper was killed before the program ended (a stop, the OOM killer),
// and its own status, a signal, stands for the whole namespace's end. A
// reaper that exited by itself without a status, or sent an error, failed.
func (l *launch) programExit() (syscall.WaitStatus, error) {
	l.exitOnce.Do(func() { l.exitWS, l.exitErr = l.readProgramExit() })
	return l.exitWS, l.exitErr
}

func (l *launch) readProgramExit() (syscall.WaitStatus, error) {
	<-l.exitMessage()
	b, err := l.msg, l.msgErr
	if err != nil {
		return 0, fmt.Errorf("read the reaper's exit pipe: %w", err)
	}
	if len(b) > 0 && b[0] == spec.Exit[0] {
		ws, err := spec.DecodeExit(b)
		return syscall.WaitStatus(ws), err
	}
	if len(b) > 0 {
		ie, err := spec.DecodeError(b)
		if err != nil {
			return 0, err
		}
		return 0, ie
	}
	ws, ok := l.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, fmt.Errorf("the reaper exited (%v) without the program's status", l.cmd.ProcessState)
	}
	return ws, nil
}
