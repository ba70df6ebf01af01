package spec

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/seccomp/load"
	"github.com/nsbox/nsbox/sandbox/trace"
)

func validSpec() *Spec {
	return &Spec{
		Version:  Version,
		RunID:    "abc",
		RootFD:   4,
		Binds:    []Bind{{FD: 5, Dest: "/workspace", Dir: true, Writable: true}},
		TmpSize:  1 << 20,
		ShmSize:  1 << 20,
		Hostname: "nsbox",
		Argv:     []string{"/usr/bin/python3.11", "-"},
		Env:      []string{"PATH=/usr/bin"},
		Cwd:      "/workspace",
		ReportFD: 6,
		CgroupTasks: []TasksFile{
			{FD: 7, Path: "/sys/fs/cgroup/memory/nsbox/abc/tasks"},
			{FD: 8, Path: "/sys/fs/cgroup/pids/nsbox/abc/tasks"},
		},
		Rlimits:  []Rlimit{{Resource: 4, Cur: 0, Max: 0}, {Resource: 7, Cur: 256, Max: 256}},
		Landlock: true,
		Seccomp:  []byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}, // ret ALLOW
	}
}

func TestRoundTrip(t *testing.T) {
	b, err := Encode(validSpec())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Binds[0].Dest != "/workspace" || !s.Binds[0].Writable || s.RootFD != 4 ||
		len(s.Rlimits) != 2 || len(s.CgroupTasks) != 2 || s.CgroupTasks[1] != (TasksFile{8, "/sys/fs/cgroup/pids/nsbox/abc/tasks"}) || s.Rlimits[1].Cur != 256 || !s.Landlock || len(s.Seccomp) != 8 || s.Seccomp[7] != 0x7f {
		t.Errorf("round trip lost data: %+v", s)
	}
}

func TestValidateRejects(t *testing.T) {
	for name, mutate := range map[string]func(*Spec){
		"version":         func(s *Spec) { s.Version = 99 },
		"relative bind":   func(s *Spec) { s.Binds[0].Dest = "usr/bin" },
		"dotdot bind":     func(s *Spec) { s.Binds[0].Dest = "/usr/../etc" },
		"stdio fd":        func(s *Spec) { s.Binds[0].FD = 1 },
		"stdio root fd":   func(s *Spec) { s.RootFD = 2 },
		"no argv":         func(s *Spec) { s.Argv = nil },
		"relative argv0":  func(s *Spec) { s.Argv[0] = "python3" },
		"NUL in env":      func(s *Spec) { s.Env = []string{"A=b\x00c"} },
		"env no equals":   func(s *Spec) { s.Env = []string{"PATH"} },
		"zero tmp":        func(s *Spec) { s.TmpSize = 0 },
		"relative cwd":    func(s *Spec) { s.Cwd = "workspace" },
		"rlimit range":    func(s *Spec) { s.Rlimits[0].Resource = 16 },
		"rlimit soft":     func(s *Spec) { s.Rlimits[0].Cur = 1 },
		"seccomp torn":    func(s *Spec) { s.Seccomp = s.Seccomp[:7] },
		"seccomp long":    func(s *Spec) { s.Seccomp = make([]byte, 8*(load.MaxInsns+1)) },
		"stdio tasks fd":  func(s *Spec) { s.CgroupTasks[0].FD = 0 },
		"tasks relative":  func(s *Spec) { s.CgroupTasks[0].Path = "memory/nsbox/abc/tasks" },
		"tasks dotdot":    func(s *Spec) { s.CgroupTasks[0].Path = "/sys/fs/cgroup/memory/../tasks" },
		"not tasks":       func(s *Spec) { s.CgroupTasks[0].Path = "/sys/fs/cgroup/memory/nsbox/abc/cgroup.procs" },
		"tasks is root":   func(s *Spec) { s.CgroupTasks[0].FD = s.RootFD },
		"tasks is bind":   func(s *Spec) { s.CgroupTasks[1].FD = s.Binds[0].FD },
		"tasks twice":     func(s *Spec) { s.CgroupTasks[1].FD = s.CgroupTasks[0].FD },
		"tasks is report": func(s *Spec) { s.ReportFD = s.CgroupTasks[0].FD },
	} {
		s := validSpec()
		mutate(s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
}

// TestLayout pins the descriptor layout the init and the supervisor share:
// consecutive from 3, in the documented order, none twice, the reaper's
// exit pipe last (it hands every descriptor below it to the setup init).
func TestLayout(t *testing.T) {
	for _, tasks := range []int{0, 1, 5} {
		l := Layout(tasks)
		got := append(append([]int{l.Sync, l.Root, l.Workspace, l.Report}, l.Tasks...), l.Status)
		if len(got) != l.Count() {
			t.Fatalf("Layout(%d): %d descriptors, Count says %d", tasks, len(got), l.Count())
		}
		for i, fd := range got {
			if fd != 3+i {
				t.Errorf("Layout(%d): descriptor %d is %d, want %d (consecutive from 3)", tasks, i, fd, 3+i)
			}
		}
	}
	// validSpec names the numbers the layout assigns.
	l, s := Layout(2), validSpec()
	if s.RootFD != l.Root || s.Binds[0].FD != l.Workspace || s.ReportFD != l.Report || s.CgroupTasks[0].FD != l.Tasks[0] {
		t.Errorf("validSpec's descriptors differ from Layout(2) = %+v", l)
	}
}

// TestExitMessage: the reaper's wait status survives the wire, and
// anything else is refused.
func TestExitMessage(t *testing.T) {
	for _, ws := range []uint32{0, 7 << 8, 6, 9, 0xffffffff} {
		got, err := DecodeExit(EncodeExit(ws))
		if err != nil || got != ws {
			t.Errorf("DecodeExit(EncodeExit(%d)) = %d, %v", ws, got, err)
		}
	}
	for _, bad := range []string{"", "X", "R", "X-1", "X12a", "X4294967296", "Y0"} {
		if ws, err := DecodeExit([]byte(bad)); err == nil {
			t.Errorf("DecodeExit(%q) = %d, want an error", bad, ws)
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	b, _ := Encode(validSpec())
	withExtra := strings.Replace(string(b), `{"version"`, `{"surprise":1,"version"`, 1)
	if _, err := Decode([]byte(withExtra)); err == nil {
		t.Error("unknown field accepted")
	}
	if _, err := Decode(append(b, []byte(" {}")...)); err == nil {
		t.Error("trailing data accepted")
	}
}

func TestStepErrorRoundTrip(t *testing.T) {
	ie := result.StepError("pivot_root", errors.Join(errors.New("pivot"), syscall.EPERM))
	got, err := DecodeError(EncodeError(ie))
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != "pivot_root" || got.Errno != "EPERM" || got.Message != ie.Message {
		t.Errorf("got %+v, want %+v", got, ie)
	}
	if _, err := DecodeError([]byte(`{"message":"no step"}`)); err == nil {
		t.Error("error without step accepted")
	}
}

func TestReadyRoundTrip(t *testing.T) {
	if got := EncodeReady(nil); string(got) != string(Ready) {
		t.Errorf("EncodeReady(nil) = %q, want %q", got, Ready)
	}
	want := []trace.Mark{{Name: "read spec", End: 12}, {Name: "pivot_root", End: 34}}
	steps, ok, err := DecodeReady(EncodeReady(want))
	if err != nil || !ok || len(steps) != 2 || steps[0] != want[0] || steps[1] != want[1] {
		t.Errorf("DecodeReady = %v, %v, %v; want %v", steps, ok, err, want)
	}
	if steps, ok, err := DecodeReady(Ready); err != nil || !ok || steps != nil {
		t.Errorf("DecodeReady(Ready) = %v, %v, %v", steps, ok, err)
	}
	if _, ok, _ := DecodeReady(EncodeError(&result.SandboxError{Step: "x", Message: "y"})); ok {
		t.Error("a step error decoded as Ready")
	}
	if _, ok, err := DecodeReady([]byte("R{")); !ok || err == nil {
		t.Errorf("corrupt steps: ok %v, err %v; want ok and an error", ok, err)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes.
func FuzzDecode(f *testing.F) {
	b, _ := Encode(validSpec())
	f.Add(b)
	v2 := validSpec() // cgroup v2 or no cgroup: no tasks files
	v2.CgroupTasks = nil
	b, _ = Encode(v2)
	f.Add(b)
	traced := validSpec() // --trace-phases
	traced.Trace = true
	b, _ = Encode(traced)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		if _, err := Encode(s); err != nil {
			t.Fatalf("accepted spec does not re-encode: %v", err)
		}
	})
}
