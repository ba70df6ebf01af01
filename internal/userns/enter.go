package userns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Environment of the outer namespace's process.
const (
	// EnvOuter is set to "1" in nsbox's outer namespace, by Enter.
	EnvOuter = "NSBOX_USERNS"
	// EnvIDs chooses how many ids the outer namespace maps: "single"
	// maps the caller's alone even when subordinate ids are granted;
	// unset or "auto" maps a subordinate range when there is one.
	EnvIDs = "NSBOX_USERNS_IDS"
	// envWait names the descriptor a child reads once newuidmap and
	// newgidmap have written its maps.
	envWait = "NSBOX_USERNS_WAIT"
	// envParent is the pid of the nsbox that made the namespace, for
	// its child to re-arm its parent-death signal against (Continue).
	envParent = "NSBOX_USERNS_PARENT"
	// envInit names the descriptor of the stand-alone init the caller's
	// nsbox checked on the host (Enter's init argument).
	envInit = "NSBOX_USERNS_INIT_FD"
)

// passedInit is the stand-alone init Enter passed down, once Continue
// took it over; nil when none was.
var passedInit *os.File

// PassedInit returns the stand-alone init that the nsbox the user started
// opened and checked on the host, where its owner is root (inside the
// namespace root's files look unowned, so the check cannot be made
// there), or nil.
func PassedInit() *os.File {
	if !Outer() {
		return nil
	}
	return passedInit
}

// Outer reports whether this process runs in the outer namespace Enter
// made.
func Outer() bool { return os.Getenv(EnvOuter) == "1" && Rootless() }

// Mode is how the outer namespace maps ids.
type Mode struct {
	// Sub is the caller's subordinate uid and gid ranges, mapped from 1
	// on; zero when the caller's own ids are mapped alone.
	SubUID, SubGID idRange
	// Why says why no subordinate range is mapped ("" when one is).
	Why string
}

// Subordinate reports whether the namespace maps a subordinate range.
func (m Mode) Subordinate() bool { return m.SubUID.Count > 0 }

// ChooseMode finds how the caller's outer namespace can map ids: a
// subordinate range of /etc/subuid and /etc/subgid through the setuid
// helpers newuidmap and newgidmap (package uidmap), when both exist and
// the files grant the caller at least three ids each; else the caller's
// own uid and gid alone.
func ChooseMode() (Mode, error) {
	if v := os.Getenv(EnvIDs); v == "single" {
		return Mode{Why: EnvIDs + "=single"}, nil
	} else if v != "" && v != "auto" {
		return Mode{}, fmt.Errorf("%s=%q: want single or auto", EnvIDs, v)
	}
	uid, gid := os.Getuid(), os.Getgid()
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	su, okU, err := subordinate("/etc/subuid", name, uid, 3)
	if err != nil {
		return Mode{}, err
	}
	sg, okG, err := subordinate("/etc/subgid", name, gid, 3)
	if err != nil {
		return Mode{}, err
	}
	if !okU || !okG {
		return Mode{Why: fmt.Sprintf("/etc/subuid and /etc/subgid grant %s no range of 3 or more ids", name)}, nil
	}
	for _, tool := range []string{"newuidmap", "newgidmap"} {
		if _, err := lookTool(tool); err != nil {
			return Mode{Why: tool + " is not installed (Debian and Ubuntu: package uidmap)"}, nil
		}
	}
	return Mode{SubUID: su, SubGID: sg}, nil
}

// lookTool finds a setuid id-map helper in PATH or /usr/bin.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// Enter runs the rest of the command in nsbox's outer namespace when the
// caller is not root: it re-executes this binary (/proc/self/exe, same
// arguments) in a new user and mount namespace, waits for it, and exits
// with its status; it returns only with an error. As root, and inside the
// outer namespace, it returns nil at once.
//
// Inside, the effective uid is 0: code that picks the user's directories
// asks NotRoot, which knows the namespace from its mark.
//
// prepare, when not nil, runs first, in the caller's process: what must
// happen before the namespace's nsbox is born (moving into a delegated
// cgroup's leaf, which it then inherits). init, when it returns a file,
// is the stand-alone init checked here, on the host, and handed down
// (PassedInit).
func Enter(prepare func() error, init func() (*os.File, error)) error {
	if os.Geteuid() == 0 {
		return nil
	}
	if os.Getenv(EnvOuter) != "" {
		return fmt.Errorf("%s is set but the effective uid is %d: not in nsbox's user namespace", EnvOuter, os.Geteuid())
	}
	mode, err := ChooseMode()
	if err != nil {
		return err
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return err
		}
	}
	env, err := outerEnv()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   os.Args,
		Env:    env,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			// The namespace dies with the command: a killed nsbox leaves
			// no sandbox running.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	var mapped *os.File
	defer func() {
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
	}()
	if mode.Subordinate() {
		// The child execs before its maps exist (newuidmap needs its
		// pid), so it holds no capabilities yet: it waits on this pipe,
		// then execs itself again as root of the namespace.
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe: %w", err)
		}
		mapped = w
		defer w.Close()
		cmd.ExtraFiles = []*os.File{r}
		cmd.Env = append(cmd.Env, envWait+"=3")
	} else {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	if init != nil {
		if f, err := init(); err == nil {
			cmd.ExtraFiles = append(cmd.ExtraFiles, f)
			cmd.Env = append(cmd.Env, envInit+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
		}
	}
	// Signals for nsbox go to the namespace's nsbox, which handles them.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT)
	signal.Ignore(unix.SIGPIPE)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("create nsbox's user namespace (clone CLONE_NEWUSER as uid %d): %w; %s", os.Getuid(), err, Hint)
	}
	if mapped != nil {
		if err := writeMaps(cmd.Process.Pid, mode); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return err
		}
		if _, err := mapped.Write([]byte{1}); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("release nsbox's user namespace: %w", err)
		}
		mapped.Close()
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ee.ExitCode())
	}
	return fmt.Errorf("wait for nsbox in its user namespace: %w", err)
}

// Hint is the fix for a user namespace the host refuses to an ordinary
// user.
const Hint = "rootless nsbox needs unprivileged user namespaces: see `nsbox doctor` " +
	"(Ubuntu 24.04: install deploy/apparmor/nsbox; Debian before 11: sysctl kernel.unprivileged_userns_clone=1; " +
	"everywhere: user.max_user_namespaces above 0)"

// writeMaps maps the caller as 0 and its subordinate range from 1 in the
// child pid's namespace, with the setuid helpers.
func writeMaps(pid int, m Mode) error {
	for _, t := range []struct {
		tool string
		own  int
		sub  idRange
	}{{"newuidmap", os.Getuid(), m.SubUID}, {"newgidmap", os.Getgid(), m.SubGID}} {
		path, err := lookTool(t.tool)
		if err != nil {
			return fmt.Errorf("%s: %w", t.tool, err)
		}
		args := []string{strconv.Itoa(pid), "0", strconv.Itoa(t.own), "1",
			"1", strconv.FormatUint(uint64(t.sub.Start), 10), strconv.FormatUint(uint64(t.sub.Count), 10)}
		out, err := exec.Command(path, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w: %s (set %s=single to map your own ids alone)",
				path, strings.Join(args, " "), err, strings.TrimSpace(string(out)), EnvIDs)
		}
	}
	return nil
}

// outerEnv is the caller's environment with the outer namespace marked
// (and the state directory made, private to the user).
func outerEnv() ([]string, error) {
	env := append(os.Environ(), EnvOuter+"=1", envParent+"="+strconv.Itoa(os.Getpid()))
	if d := os.Getenv("NSBOX_STATE_DIR"); d == "" {
		if err := os.MkdirAll(StateHome(), 0o700); err != nil {
			return nil, fmt.Errorf("create state directory: %w", err)
		}
	}
	return env, nil
}

// Continue is the first thing a command does. In a child Enter started
// before its id maps existed, it waits for them, then executes this
// binary again, now root of the namespace with its capabilities. In the
// child that then runs the command, it re-arms the parent-death signal:
// the kernel clears it at an execve that gains capabilities, which
// becoming root of the namespace is, and without it a killed nsbox would
// leave its namespace's nsbox, and the sandbox, running. It returns at
// once everywhere else.
func Continue() {
	fd := os.Getenv(envWait)
	if fd == "" {
		rearmParentDeath()
		takeInit()
		return
	}
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		fmt.Fprintf(os.Stderr, "nsbox: %s=%q: not a descriptor\n", envWait, fd)
		os.Exit(125)
	}
	var b [1]byte
	if k, _ := unix.Read(n, b[:]); k != 1 {
		os.Exit(125) // the outer nsbox gave up, and said why
	}
	unix.Close(n)
	os.Unsetenv(envWait)
	err = unix.Exec("/proc/self/exe", os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "nsbox: re-execute in nsbox's user namespace: %v\n", err)
	os.Exit(125)
}

// rearmParentDeath sets SIGKILL as the parent-death signal of the child
// Enter started, then checks that its parent is still the nsbox that
// started it: if that one died first, the signal will never come.
func rearmParentDeath() {
	want := os.Getenv(envParent)
	if want == "" {
		return
	}
	os.Unsetenv(envParent) // this process's alone, not its children's
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: set the parent-death signal in nsbox's user namespace: %v\n", err)
		os.Exit(125)
	}
	if strconv.Itoa(os.Getppid()) != want {
		os.Exit(125) // the nsbox the user started is gone
	}
}

// takeInit takes over the stand-alone init Enter passed down: a regular
// file, moved above the descriptors a run hands its init (they start at
// 3) and made close-on-exec, so no child inherits it by accident.
func takeInit() {
	v := os.Getenv(envInit)
	if v == "" {
		return
	}
	os.Unsetenv(envInit)
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 || os.Getenv(EnvOuter) != "1" {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(n, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	high, err := unix.FcntlInt(uintptr(n), unix.F_DUPFD_CLOEXEC, 100)
	unix.Close(n)
	if err == nil {
		passedInit = os.NewFile(uintptr(high), "nsbox-init (checked by the caller's nsbox)")
	}
}
