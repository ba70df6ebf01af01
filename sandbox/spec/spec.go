// Package spec defines what the supervisor tells the sandbox init and what
// the init answers: the Spec of one run and the messages of the sync
// protocol between them.
//
// The supervisor (host side) and the init (inside the new namespaces) are
// the same binary, started twice. They talk over one inherited
// SOCK_SEQPACKET socket, named by the init's --sync-fd flag:
//
//	supervisor → init   Spec (JSON)          right after start
//	supervisor → init   Go                   right after the Spec
//	init → supervisor   Listener + socket    with Spec.Proxy, the proxy endpoint
//	init → supervisor   InitError (JSON)     if a setup step failed
//	init → supervisor   Ready                after the last setup step
//	init → supervisor   InitError (JSON)     if execve failed
//	init → supervisor   EOF                  the socket is close-on-exec: EOF
//	                                         after Ready means the program runs;
//	                                         EOF before it, the init died
//
// The Spec is decoded strictly (unknown fields rejected) and validated
// before the init acts on it, so a mismatched or corrupt message stops the
// run instead of building a half-configured sandbox.
package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// Version is bumped whenever Spec or the messages change incompatibly.
// 4: CgroupTasks (the init attaches itself on cgroup v1).
// 5: Trace (the init times its steps and sends them with Ready).
// 6: a failed step is sent as result.SandboxError (errno by name).
// 7: a reaper is PID 1 and reports the program's wait status (Exit).
// 8: Proxy (the init listens on ProxyAddr and sends the socket, Listener).
const Version = 8

// Bind is one bind mount into the new root. The supervisor prepares it as
// a detached mount (open_tree + mount_setattr, flags final) and passes the
// mount fd as descriptor FD; the init only attaches it with move_mount, so
// it never resolves a host path itself (it may lack search permission on
// the way, and a path could be swapped between check and use). Writable
// tells the init which flags to verify after attaching.
type Bind struct {
	FD       int    `json:"fd"`
	Dest     string `json:"dest"`
	Dir      bool   `json:"dir"`
	Writable bool   `json:"writable"`
}

// TasksFile is the v1 `tasks` file of the run's cgroup in one hierarchy,
// opened for writing by the supervisor and inherited as descriptor FD.
// Path is the host path it was opened at, for error messages only: the
// init never opens it.
type TasksFile struct {
	FD   int    `json:"fd"`
	Path string `json:"path"`
}

// Spec is everything the init needs to build the sandbox and start the
// program.
type Spec struct {
	Version int    `json:"version"`
	RunID   string `json:"run_id"`
	// RootFD is the detached, read-only mount of the root filesystem
	// (built by nsbox rootfs build): it becomes "/". The init attaches it
	// like a bind.
	RootFD   int      `json:"root_fd"`
	Binds    []Bind   `json:"binds"` // mounted into the root: /workspace
	TmpSize  int64    `json:"tmp_size"`
	ShmSize  int64    `json:"shm_size"`
	Hostname string   `json:"hostname"`
	Argv     []string `json:"argv"` // Argv[0] is the absolute path executed inside the root
	Env      []string `json:"env"`
	Cwd      string   `json:"cwd"`
	// ReportFD, when not 0, is the write end of the pipe on which the
	// Python runner reports policy violations; it is the one descriptor
	// besides stdio that survives execve.
	ReportFD int `json:"report_fd"`
	// CgroupTasks are the run cgroup's v1 tasks files, one per
	// hierarchy. The init writes "0" to each first thing, moving the
	// thread that will execve the program into the run's cgroup, and
	// refuses to go on if one fails. Empty on cgroup v2 (the init is
	// cloned into its cgroup) and for a run without a cgroup.
	CgroupTasks []TasksFile `json:"cgroup_tasks"`
	// Rlimits are lowered (never raised) right before execve.
	Rlimits []Rlimit `json:"rlimits"`
	// Landlock asks for a Landlock ruleset: read-only everywhere except
	// WritableDirs.
	Landlock bool `json:"landlock"`
	// Seccomp is the compiled filter, a raw array of struct sock_filter
	// (8 bytes per instruction, native byte order), loaded last before
	// execve. The supervisor compiles it; the init never runs libseccomp.
	// Empty means no filter.
	Seccomp []byte `json:"seccomp,omitempty"`
	// Proxy asks for the proxy endpoint of network allowlist mode: the
	// init listens on ProxyAddr in the run's network namespace, sends
	// the listening socket to the supervisor (Listener), which serves it
	// from the host, and keeps none of it. With Landlock (ABI 4 and
	// later) the program may then connect to ProxyPort only, and bind
	// no TCP port.
	Proxy bool `json:"proxy,omitempty"`
	// Trace asks the init to time each setup step and send the times with
	// Ready (nsbox run --trace-phases). Off, a step costs one branch.
	Trace bool `json:"trace,omitempty"`
}

// Rlimit is one resource limit for the program. Resource is a
// unix.RLIMIT_* number.
type Rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// Encode returns the JSON form of s.
func Encode(s *Spec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// Decode parses and validates a Spec, rejecting unknown fields.
func Decode(b []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode spec: trailing data")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the invariants the init relies on.
func (s *Spec) Validate() error {
	if s.Version != Version {
		return fmt.Errorf("spec version %d, want %d (supervisor and init from different builds?)", s.Version, Version)
	}
	if s.RootFD < 3 {
		return fmt.Errorf("spec: root fd %d is not an inherited descriptor", s.RootFD)
	}
	if s.ReportFD != 0 && s.ReportFD < 3 {
		return fmt.Errorf("spec: report fd %d is not an inherited descriptor", s.ReportFD)
	}
	for _, b := range s.Binds {
		if b.FD < 3 {
			return fmt.Errorf("spec: bind %s: fd %d is not an inherited descriptor", b.Dest, b.FD)
		}
		if err := insidePath("bind", b.Dest); err != nil {
			return err
		}
	}
	for _, t := range s.CgroupTasks {
		if t.FD < 3 {
			return fmt.Errorf("spec: cgroup tasks %s: fd %d is not an inherited descriptor", t.Path, t.FD)
		}
		if !path.IsAbs(t.Path) || path.Clean(t.Path) != t.Path || path.Base(t.Path) != "tasks" || strings.ContainsRune(t.Path, 0) {
			return fmt.Errorf("spec: cgroup tasks path %q is not an absolute, clean path to a tasks file", t.Path)
		}
	}
	if err := s.distinctFDs(); err != nil {
		return err
	}
	if s.TmpSize <= 0 || s.ShmSize <= 0 {
		return fmt.Errorf("spec: tmp_size %d and shm_size %d must be positive", s.TmpSize, s.ShmSize)
	}
	if len(s.Argv) == 0 || !path.IsAbs(s.Argv[0]) {
		return fmt.Errorf("spec: argv[0] must be an absolute path, got %q", s.Argv)
	}
	if err := insidePath("cwd", s.Cwd); err != nil {
		return err
	}
	for _, kv := range append(append([]string{}, s.Argv...), s.Env...) {
		if strings.ContainsRune(kv, 0) {
			return fmt.Errorf("spec: NUL byte in argv or env")
		}
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("spec: env entry %q is not KEY=VALUE", kv)
		}
	}
	for _, r := range s.Rlimits {
		if r.Resource < 0 || r.Resource >= rlimitCount {
			return fmt.Errorf("spec: rlimit resource %d out of range", r.Resource)
		}
		if r.Cur > r.Max {
			return fmt.Errorf("spec: rlimit %d: soft %d above hard %d", r.Resource, r.Cur, r.Max)
		}
	}
	if n := len(s.Seccomp); n%8 != 0 || n/8 > load.MaxInsns {
		return fmt.Errorf("spec: seccomp filter of %d bytes is not 0..%d whole instructions", n, load.MaxInsns)
	}
	return nil
}

// distinctFDs checks that no descriptor is named twice: a mount fd used as
// a tasks file (or the report pipe) would be a supervisor bug that the
// init must not act on.
func (s *Spec) distinctFDs() error {
	seen := map[int]string{s.RootFD: "root"}
	add := func(fd int, what string) error {
		if other, dup := seen[fd]; dup {
			return fmt.Errorf("spec: fd %d named for both %s and %s", fd, other, what)
		}
		seen[fd] = what
		return nil
	}
	for _, b := range s.Binds {
		if err := add(b.FD, "bind "+b.Dest); err != nil {
			return err
		}
	}
	for _, t := range s.CgroupTasks {
		if err := add(t.FD, t.Path); err != nil {
			return err
		}
	}
	if s.ReportFD != 0 {
		return add(s.ReportFD, "the report pipe")
	}
	return nil
}

// rlimitCount is RLIM_NLIMITS on Linux: resources are 0..15.
const rlimitCount = 16

// insidePath accepts absolute, clean paths without NUL bytes or "..".
func insidePath(what, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return fmt.Errorf("spec: %s path %q must be absolute and clean", what, p)
	}
	return nil
}
