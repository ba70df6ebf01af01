// Package initproc is the sandbox init: the nsbox binary re-executed by the
// supervisor inside new user, mount, PID, network, IPC, UTS and cgroup
// namespaces. It runs twice there. As PID 1 it is the reaper (reaper.go):
// it starts the setup init, reaps orphans, forwards signals and reports
// the program's exit. As PID 2 it is the setup init (init.go): it reads
// the Spec, builds the new root, drops every privilege, lowers the
// rlimits, adds Landlock and seccomp, and execs the program. Both run as
// (namespace) root with no privilege on the host.
//
// WARNING: the order of the steps in run is the security design. After any
// change, run the integration tests as root:
//
//	sudo go test ./tests/... -run . -count=1
package initproc

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/loopback"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/seccomp/load"
	"github.com/nsbox/nsbox/sandbox/spec"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// Main runs the init inv selects, the reaper or the setup init. It never
// returns: the setup init execs the program or reports the failed step to
// the supervisor over the sync socket and exits.
func Main(inv Invocation) {
	if inv.Reaper() {
		reaperMain(inv)
	}
	// The end of the Go runtime's start-up, for --trace-phases.
	started := trace.Now()
	syncFD := inv.SyncFD
	err := run(syncFD, started)
	// run only returns on failure: report the step and errno.
	ie := result.StepError("init", err)
	if _, werr := unix.Write(syncFD, spec.EncodeError(ie)); werr != nil {
		fmt.Fprintf(os.Stderr, "nsbox init: %v (and reporting it failed: %v)\n", ie, werr)
	}
	os.Exit(1)
}

// run is one linear list of steps; each returns a *result.SandboxError
// naming it. started is when Main was entered; tr.Mark after a step
// records its end.
func run(syncFD int, started int64) error {
	// Capabilities, PDEATHSIG, no_new_privs and seccomp are per-thread:
	// every step and the final execve run on this one OS thread.
	runtime.LockOSThread()

	// Refuse to run anywhere but in the fresh namespaces the supervisor
	// made, as the reaper's child: run by hand on the host, the mounts
	// below would hit the host.
	if err := checkNamespaces(false); err != nil {
		return result.StepError("check namespaces", err)
	}
	checked := trace.Now()

	// Read the spec. The uid/gid maps were written before the init ran.
	s, err := readSpec(syncFD)
	if err != nil {
		return result.StepError("read spec", err)
	}
	tr := trace.New(s.Trace, started)
	tr.Add("", []trace.Mark{{Name: "runtime start", End: started},
		{Name: "check namespaces", End: checked}, {Name: "read spec", End: trace.Now()}})
	// Into the run's cgroup before any setup step. On v2 the reaper was
	// cloned into it, and this process with it; on v1 this thread, the one
	// that will execve, attaches itself, so the program starts inside
	// every hierarchy and nothing forks before. The init's other Go
	// threads stay outside and die at execve, and the reaper stays in the
	// supervisor's cgroup. A failure ends the init: it never execs
	// unattached.
	if err := attachCgroup(s.CgroupTasks); err != nil {
		return result.StepError("cgroup attach", err)
	}
	tr.Mark("cgroup attach")
	// Wait for "go": the supervisor sends it right after the spec, and an
	// EOF instead means it gave up (or died).
	if err := waitGo(syncFD); err != nil {
		return result.StepError("wait for go", err)
	}
	tr.Mark("wait for go")
	// The run's user namespace counts its users' namespaces, inotify
	// instances and watches and fanotify marks against its own limits,
	// far below the host's, before anything of the program exists.
	if err := setUsernsLimits("/proc"); err != nil {
		return result.StepError("userns limits", err)
	}
	tr.Mark("userns limits")

	// No mount or unmount done here may propagate to the host, and no host
	// mount event may reach in.
	if err := mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return result.StepError("make / private", err)
	}
	tr.Mark("make / private")
	// The new root is the prebuilt root filesystem, attached read-only
	// (nosuid, nodev) from the detached mount the supervisor prepared: the
	// interpreter, its libraries and vetted packages, and nothing else of
	// the host. It already holds /etc and the empty mount points below.
	if err := attachRoot(s.RootFD); err != nil {
		return result.StepError("attach root", err)
	}
	tr.Mark("attach root")
	// The read-write /workspace: nosuid, nodev, noexec.
	for _, b := range s.Binds {
		if err := attachBind(b.FD, b.Dest, b.Dir, b.Writable); err != nil {
			return result.StepError("bind "+b.Dest, err)
		}
	}
	tr.Mark("binds")
	// /tmp is the only other writable place, bounded in bytes and inodes,
	// and like /workspace not executable.
	if err := mountTmpfs(spec.Tmp, s.TmpSize, 0o1777, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return result.StepError("mount "+spec.Tmp, err)
	}
	tr.Mark("mount /tmp")
	if err := setupDev(s.ShmSize); err != nil {
		return result.StepError("mount /dev", err)
	}
	tr.Mark("mount /dev")
	if err := setupProc(); err != nil {
		return result.StepError("mount /proc", err)
	}
	tr.Mark("mount /proc")
	// Switch to the new root and detach the old one: from here no host
	// path is reachable by name.
	if err := pivotRoot(); err != nil {
		return result.StepError("pivot_root", err)
	}
	tr.Mark("pivot_root")
	// Everything but /workspace, /tmp and /dev/shm is read-only: prove it
	// of the root rather than trust the supervisor's mount flags.
	if err := checkRootReadOnly(); err != nil {
		return result.StepError("check / read-only", err)
	}
	tr.Mark("check / read-only")
	// Own hostname (UTS namespace) and a working loopback (network
	// namespace without any other interface: no network).
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return result.StepError("sethostname", err)
	}
	tr.Mark("sethostname")
	if err := loopback.Up(); err != nil {
		return result.StepError("loopback up", err)
	}
	tr.Mark("loopback up")
	// Network allowlist mode: the proxy endpoint, listening on loopback
	// here and served from the host. The program gets no route, no
	// resolver and no other interface; the supervisor dials for it.
	if s.Proxy {
		if err := sendProxyListener(syncFD); err != nil {
			return result.StepError("proxy listener", err)
		}
		tr.Mark("proxy listener")
	}

	// New session: the program has no controlling terminal, so it cannot
	// push input into the caller's terminal with TIOCSTI.
	if _, err := unix.Setsid(); err != nil {
		return result.StepError("setsid", err)
	}
	tr.Mark("setsid")
	// Capabilities: empty the bounding and ambient sets while CAP_SETPCAP
	// is still held, then drop to the sandbox uid/gid, then clear and
	// verify the remaining sets.
	if err := dropBoundingSet(); err != nil {
		return result.StepError("drop bounding set", err)
	}
	tr.Mark("drop bounding set")
	if err := dropIDs(spec.SandboxID, spec.SandboxID); err != nil {
		return result.StepError("drop uid/gid", err)
	}
	tr.Mark("drop uid/gid")
	if err := clearCaps(); err != nil {
		return result.StepError("clear capabilities", err)
	}
	tr.Mark("clear capabilities")
	// The uid change reset PDEATHSIG: re-arm it so the program still dies
	// with the reaper, as the reaper dies with the supervisor.
	if err := setPdeathsig(); err != nil {
		return result.StepError("re-arm pdeathsig", err)
	}
	tr.Mark("re-arm pdeathsig")
	// Enter the working directory and prove it lies in the new root
	// (CVE-2024-21626).
	if err := verifyCwd(s.Cwd); err != nil {
		return result.StepError("verify cwd", err)
	}
	tr.Mark("verify cwd")
	// Nothing but stdio (and the runner's report pipe) survives execve
	// (CVE-2024-21626).
	if err := closeExtraFDs(s.ReportFD); err != nil {
		return result.StepError("close fds", err)
	}
	tr.Mark("close fds")
	// Resource limits the cgroup cannot express: no core dumps, fewer
	// open files, bounded file size and stack, and CPU seconds per process
	// as a second line behind the wall clock. Only ever lowered.
	if err := setRlimits(s.Rlimits); err != nil {
		return result.StepError("rlimits", err)
	}
	tr.Mark("rlimits")
	// No execve from here on can gain privileges; Landlock and seccomp
	// both require this of an unprivileged caller.
	if err := setNoNewPrivs(); err != nil {
		return result.StepError("no_new_privs", err)
	}
	tr.Mark("no_new_privs")
	// A second fence behind the read-only mounts: even a mount the program
	// could somehow make writable stays read-only to it. In allowlist mode
	// it also keeps TCP to the proxy's port, behind the seccomp filter
	// that allows stream sockets only.
	if s.Landlock {
		var ports []uint16
		if s.Proxy {
			ports = []uint16{spec.ProxyPort}
		}
		if _, err := applyLandlock(ports...); err != nil {
			return result.StepError("landlock", err)
		}
		tr.Mark("landlock")
	}
	// Tell the supervisor setup is complete: an EOF before this means the
	// init died, an EOF after it that execve succeeded.
	if _, err := unix.Write(syncFD, spec.EncodeReady(tr.Marks())); err != nil {
		return result.StepError("report ready", err)
	}
	// Seccomp last, right before execve, so that no setup step above has
	// to be allowed by the filter. The filter was compiled by the
	// supervisor; loading it is one system call. Only execve follows.
	if len(s.Seccomp) > 0 {
		if err := load.Install(s.Seccomp); err != nil {
			return result.StepError("seccomp", err)
		}
	}

	// The sync socket is close-on-exec: its EOF tells the supervisor the
	// program started. On failure execve returns and we report it.
	err = unix.Exec(s.Argv[0], s.Argv, s.Env)
	return result.StepError("execve "+s.Argv[0], err)
}

// checkNamespaces verifies the init is where the supervisor started it:
// the reaper as PID 1 of a new PID namespace, the setup init as the
// reaper's child there; both in a user namespace that does not map the
// whole host id range.
func checkNamespaces(reaper bool) error {
	pid, ppid := os.Getpid(), os.Getppid()
	switch {
	case reaper && pid != 1:
		return fmt.Errorf("pid %d, not 1: not in a new PID namespace (nsbox %s is internal)", pid, "init")
	case !reaper && ppid != 1:
		return fmt.Errorf("parent pid %d, not 1: not started by the reaper (nsbox %s is internal)", ppid, "init")
	case !reaper:
		// Parent pid 1 alone would also hold on the host: the kernel
		// must see this process in more than one PID namespace.
		if err := checkNestedPID(); err != nil {
			return err
		}
	}
	const p = "/proc/self/uid_map"
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if f := strings.Fields(string(b)); len(f) >= 3 && f[0] == "0" && f[1] == "0" {
		return fmt.Errorf("%s maps host root (%q): not in a sandbox user namespace", p, strings.TrimSpace(string(b)))
	}
	return nil
}

// checkNestedPID verifies, from the NSpid line of /proc/self/status (the
// host's /proc: nothing is mounted yet), that this process has a pid in
// a PID namespace below /proc's, and that it is its own.
func checkNestedPID() error {
	const p = "/proc/self/status"
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) < 2 || f[len(f)-1] != strconv.Itoa(os.Getpid()) {
				return fmt.Errorf("%s: NSpid %q: not in a new PID namespace (nsbox %s is internal)", p, strings.TrimSpace(v), "init")
			}
			return nil
		}
	}
	return fmt.Errorf("%s has no NSpid line (Linux 4.1+)", p)
}

// readSpec reads and validates the spec message.
func readSpec(fd int) (*spec.Spec, error) {
	buf := make([]byte, spec.MaxMessage)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, fmt.Errorf("read sync fd %d: %w", fd, err)
	}
	return spec.Decode(buf[:n])
}

// waitGo blocks until the supervisor sends spec.Go. EOF means the
// supervisor gave up (or died): stop.
func waitGo(fd int) error {
	buf := make([]byte, 8)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return fmt.Errorf("read sync fd %d: %w", fd, err)
	}
	if n != len(spec.Go) || buf[0] != spec.Go[0] {
		return fmt.Errorf("unexpected sync message %q (supervisor gone?)", buf[:n])
	}
	return nil
}
