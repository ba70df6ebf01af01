package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/initproc"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/spec"
	"github.com/nsbox/nsbox/sandbox/trace"
)

// TestMain lets this test binary be the sandbox init: start re-executes
// it as "nsbox init --sync-fd 3", as it re-executes nsbox.
func TestMain(m *testing.M) {
	if inv, ok := initproc.Args(os.Args); ok {
		initproc.Main(inv) // returns only via os.Exit
	}
	os.Exit(m.Run())
}

// testInitExe copies this test binary where the init, running as an
// unprivileged host uid, may execute it: go test's build directory is
// searchable by its owner only.
func testInitExe(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	dir, err := os.MkdirTemp("", "nsbox-supervisor-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	exe := filepath.Join(dir, "nsbox")
	dst, err := os.OpenFile(exe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return exe
}

// removedCgroupTasks returns the tasks files of a v1 cgroup that was
// removed after they were opened (a write to them fails with ENODEV),
// or nil on a host without v1 cgroups.
func removedCgroupTasks(t *testing.T) []*os.File {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	parent := "nsbox-test-" + hex.EncodeToString(b[:])
	cg, err := cgroup.NewWithParent(parent, "gone", cgroup.Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1})
	if err != nil {
		mustwork.Skip(t, "no cgroup: %v", err)
		return nil
	}
	paths := cg.Paths()
	t.Cleanup(func() {
		for _, dir := range paths {
			os.Remove(filepath.Dir(dir)) // the test's parent; cpu and cpuacct may share one
		}
	})
	if cg.Version() != 1 {
		cg.Destroy()
		return nil
	}
	files, err := cg.OpenTasks()
	if err != nil {
		cg.Destroy()
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(files...) })
	if err := cg.Destroy(); err != nil {
		t.Fatal(err)
	}
	return files
}

// firstTasksFD is the descriptor of the first v1 tasks file in the init.
var firstTasksFD = spec.Layout(1).Tasks[0]

// attachCase is an init given tasks files it cannot attach through.
type attachCase struct {
	name  string
	extra []*os.File // the init's tasks descriptors, from firstTasksFD on
	tasks []spec.TasksFile
	want  string // in the message
	errno string // "" for none
}

// TestInitRefusesFailedAttach: an init that cannot attach itself to its
// cgroup (v1) reports step "cgroup attach" naming the tasks file, and
// exits without going on: no Ready, exit status 1 (which the reaper
// reports). The run's result
// becomes a sandbox_error with that step and message. The report also
// arrives when the supervisor reads it only after the init is gone with
// Go unread (the kernel then reports ECONNRESET first).
func TestInitRefusesFailedAttach(t *testing.T) {
	mustwork.NeedRoot(t)
	exe := testInitExe(t)
	const fake = "/sys/fs/cgroup/pids/nsbox/s0-test/tasks"
	cases := []attachCase{
		{"descriptor not open", nil, []spec.TasksFile{{FD: 100, Path: fake}}, "fstatfs " + fake + " (fd 100)", "EBADF"},
		{"not a cgroup file", []*os.File{devNull(t)}, []spec.TasksFile{{FD: firstTasksFD, Path: fake}}, fmt.Sprintf("%s (fd %d): not on a cgroup v1 filesystem", fake, firstTasksFD), ""},
	}
	if gone := removedCgroupTasks(t); gone != nil {
		c := attachCase{name: "cgroup removed", extra: gone, want: "write 0 to " + gone[0].Name(), errno: "ENODEV"}
		for i, f := range gone {
			c.tasks = append(c.tasks, spec.TasksFile{FD: firstTasksFD + i, Path: f.Name()})
		}
		// Like the cgroup files the Go runtime keeps open for GOMAXPROCS.
		ro, err := os.Open("/sys/fs/cgroup/pids/tasks")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ro.Close() })
		cases = append(cases, c, attachCase{"read-only cgroup file", []*os.File{ro},
			[]spec.TasksFile{{FD: firstTasksFD, Path: ro.Name()}}, fmt.Sprintf("%s (fd %d): not opened write-only", ro.Name(), firstTasksFD), ""})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { attachFails(t, exe, tc, false) })
		t.Run(tc.name+" read late", func(t *testing.T) { attachFails(t, exe, tc, true) })
	}
}

// attachFails starts the init with tc's tasks files and checks that it
// refuses to go on. With late, the supervisor sends the spec and Go and
// reads the init's answer only once the init is gone.
func attachFails(t *testing.T, exe string, tc attachCase, late bool) {
	// The root, workspace and report descriptors are never used: the init
	// stops before it mounts anything.
	fds := spec.Layout(len(tc.extra))
	in := inherited{root: devNull(t), workspace: devNull(t), report: devNull(t), tasks: tc.extra}
	l, err := start(exe, in, fds, nil, testIDs(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.closeHostEnds()
	sp := &spec.Spec{
		Version: spec.Version, RunID: "test", RootFD: fds.Root,
		Binds:   []spec.Bind{{FD: fds.Workspace, Dest: spec.Workspace, Dir: true, Writable: true}},
		TmpSize: 1 << 20, ShmSize: 1 << 20, Hostname: spec.Hostname,
		Argv: []string{"/bin/true"}, Cwd: spec.Workspace, CgroupTasks: tc.tasks,
	}
	ready := false
	onReady := func([]trace.Mark) { ready = true }
	var werr error
	if late {
		msg, encErr := spec.Encode(sp)
		if encErr != nil {
			t.Fatal(encErr)
		}
		if sendErr := l.send(msg); sendErr != nil {
			t.Fatal(sendErr)
		}
		l.send(spec.Go) // EPIPE if the init is gone already
		werr = l.wait()
		err = l.awaitExec(onReady)
	} else {
		err = l.release(sp, onReady)
		werr = l.wait()
	}

	var ie *result.SandboxError
	if !errors.As(err, &ie) || ie.Step != "cgroup attach" || !strings.Contains(ie.Message, tc.want) || ie.Errno != tc.errno {
		t.Fatalf("init answered %v (%#v), want step cgroup attach, %q, errno %q", err, ie, tc.want, tc.errno)
	}
	// The setup init exited 1; the reaper reported it and exited 0.
	ws, exitErr := l.programExit()
	if ready || werr != nil || exitErr != nil || !ws.Exited() || ws.ExitStatus() != 1 {
		t.Errorf("ready %v, reaper ended with %v, reported %v (%v): want no Ready and the setup init's exit status 1", ready, werr, ws, exitErr)
	}
	if se := result.StepError("setup", err); se.Step != "cgroup attach" || !strings.Contains(se.Message, tc.want) {
		t.Errorf("result error %+v, want step cgroup attach naming the tasks file", se)
	}
}

// devNull opens /dev/null for writing until the test ends.
func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
