package supervisor

import (
	"errors"
	"os"

	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/roots"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Prepare does the host side of a run, up to a sandbox init that waits
// for its spec: everything that can be done before the program is known.
// Each step names itself in the result's error and in the trace; what it
// creates on the host goes on the cleanup stack. The order is the design:
// checks that create nothing first, then what leaves state on the host,
// the init last. On failure Prepare returns the step error, and Finish
// reports it.
//
// WARNING: the order of the steps is part of the security design. After
// any change, run the integration tests as root:
//
//	NSBOX_MUST_WORK=1 make test
func (sb *Sandbox) Prepare() error {
	if sb.state != created {
		panic("bug: supervisor: Prepare called twice")
	}
	sb.state = prepared
	pl, tr := sb.o.Plan, sb.o.Trace

	// Host root, or root of nsbox's own user namespace (rootless mode,
	// which the nsbox command enters), makes the namespaces, the cgroup
	// and the uid maps; without it the run would fail half-way.
	if !isRoot() {
		return sb.fail("privileges", errors.New("the supervisor needs root: host root, or root of nsbox's user namespace, which the nsbox commands enter when started by another user"))
	}
	// The root filesystem, checked against its manifest before anything
	// is created: a tampered or half-built root never runs. Building it
	// is not a run's work (roots).
	root, err := roots.Open(pl.Root.Name, pl.Root.Full)
	if err != nil {
		return sb.fail("rootfs", err)
	}
	sb.root, sb.stats.RootManifestSHA256 = root, root.Header.ManifestSHA256
	sb.clean.push(root.Close) // held until the run is over: a rebuild keeps this generation
	tr.Mark("rootfs")

	// The run directory, locked for the run's life so that a later
	// supervisor can tell this run from a crashed one's leftovers (which
	// it removes first).
	rd, err := newRunDir(sb.o.StateDir, sb.o.ID)
	if err != nil {
		return sb.fail("state dir", err)
	}
	sb.clean.push(rd.remove)
	tr.Mark("state dir")
	// The run's own host uids and gids, unshared with any other run, so
	// that what the kernel counts per user is the run's alone (ids.go).
	// Released last, once no process of the run is left.
	ids, err := runIDsFor(sb.o.IDRange, sb.o.ID)
	if err != nil {
		return sb.fail("ids", err)
	}
	sb.clean.push(ids.release)
	sb.ids = ids
	tr.Mark("ids")
	// /workspace, as a detached mount whose flags are final before the
	// init can see it (noexec, nosuid, nodev): a fresh tmpfs bounded in
	// bytes and inodes, or the caller's directory, checked to be writable
	// by the sandbox user and refused when the plan requires a bounded
	// workspace and nothing bounds it. The result reports the bounds.
	var ws *workspace
	if sb.o.Workspace == "" {
		ws, err = freshWorkspace(pl.Workspace, ids)
	} else {
		ws, err = givenWorkspace(sb.o.Workspace, pl.Workspace, ids)
	}
	if err != nil {
		return sb.fail("workspace", err)
	}
	sb.clean.push(ws.close)
	sb.ws = ws
	sb.r.Limits.WorkspaceBytes, sb.r.Limits.WorkspaceInodes = ws.bytes, ws.inodes
	tr.Mark("workspace")

	// The seccomp filter, compiled before the init exists (a built-in
	// profile when nsbox was built), so that the process that becomes the
	// sandbox only loads it (one system call) and a bad profile refuses
	// the run before anything runs.
	filter, err := loadFilter(pl.Seccomp, sb.o.StateDir)
	if err != nil {
		return sb.fail("seccomp", err)
	}
	tr.Mark("seccomp")
	// The cgroup last of the confinement: it is the one protection that
	// leaves kernel state on the host. Leftovers of supervisors that died
	// mid-run go first.
	if pl.Cgroup != nil {
		cg, err := newCgroup(sb.o.StateDir, sb.o.ID, *pl.Cgroup)
		if err != nil {
			return sb.fail("cgroup", err)
		}
		sb.clean.push(cg.Destroy)
		sb.conf.cg = cg
		limits := pl.Limits
		limits.WorkspaceBytes, limits.WorkspaceInodes = ws.bytes, ws.inodes
		sb.r.Limits = &limits
	}
	tr.Mark("cgroup")

	// The root read-only, as a detached mount whose flags are final
	// before the init can see it, like /workspace's: the init never
	// resolves a host path.
	rootMnt, err := detachedBind(root.Dir, false)
	if err != nil {
		return sb.fail("mounts", err)
	}
	sb.clean.pushClose(rootMnt)
	tr.Mark("mounts")
	// The runner's report pipe: the write end goes to the init, the read
	// end is drained here while the program runs.
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return sb.fail("report pipe", err)
	}
	sb.clean.pushClose(reportR, reportW)
	tr.Mark("report pipe")
	// On cgroup v1 the init attaches itself to the run's cgroup through
	// tasks files opened here, as host root (v2 clones it in instead).
	tasks, err := cgroupTasks(sb.conf.cg)
	if err != nil {
		return sb.fail("cgroup", err)
	}
	sb.clean.pushClose(tasks...)

	// The spec: every descriptor the init inherits has the number
	// spec.Layout gives it, and the spec names them.
	fds := spec.Layout(len(tasks))
	sp, err := newSpec(sb.o, root, fds, tasks, filter)
	if err != nil {
		return sb.fail("spec", err)
	}
	sb.sp = sp
	tr.Mark("spec")

	// Start the init in new namespaces: fork, uid/gid maps written from
	// here, clone into the cgroup (v2), execve. It then waits for the spec.
	exe := sb.o.Exe
	if exe == "" {
		exe = initExe()
	}
	l, err := start(exe, inherited{root: rootMnt, workspace: ws.mnt, report: reportW, tasks: tasks}, fds, sb.conf.cg, ids)
	if err != nil {
		return sb.fail("start init", err)
	}
	sb.l = l
	sb.clean.push(l.closeHostEnds)
	// The init has its copies: the host ends of what it inherited go now
	// (the report pipe's EOF must come only from the sandbox's side).
	closeAll(rootMnt, ws.mnt, reportW)
	closeAll(tasks...)
	if pl.Runner.Mode == pyrunner.ModeSession {
		sb.repR = reportR // read as events once started (Start)
	} else {
		sb.rep = readReport(reportR, reportCap(sb.o.Plan.Runner))
	}
	sb.r.Sandbox = sb.active()
	tr.Mark("start init")
	return nil
}

// newSpec describes the run for the init: the plan's values, the
// descriptors of fds and the runner's command line.
func newSpec(o Options, root *roots.Root, fds spec.FDs, tasks []*os.File, filter []byte) (*spec.Spec, error) {
	pl := o.Plan
	cfg := pl.Runner
	cfg.ReportFD = fds.Report
	argv, err := pyrunner.Argv(root.Header.Python.Path, pyrunner.CompiledPath(), cfg)
	if err != nil {
		return nil, err
	}
	sp := &spec.Spec{
		Version:  spec.Version,
		RunID:    o.ID,
		RootFD:   fds.Root,
		Binds:    []spec.Bind{{FD: fds.Workspace, Dest: spec.Workspace, Dir: true, Writable: true}},
		TmpSize:  pl.TmpSize,
		ShmSize:  pl.ShmSize,
		Hostname: spec.Hostname,
		Argv:     argv,
		Env:      pl.Env,
		Cwd:      spec.Workspace,
		ReportFD: fds.Report,
		Rlimits:  pl.Rlimits,
		Landlock: pl.LandlockABI > 0,
		Seccomp:  filter,
		Proxy:    pl.Network != nil,
		Trace:    o.Trace.On(), // the init's steps become "init: ..." phases
	}
	for i, f := range tasks {
		sp.CgroupTasks = append(sp.CgroupTasks, spec.TasksFile{FD: fds.Tasks[i], Path: f.Name()})
	}
	// Encoded now, so that a spec the init would refuse refuses the run
	// before the init exists.
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	return sp, nil
}
