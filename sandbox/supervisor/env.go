package supervisor

import (
	"fmt"
	"sort"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/hostroot"
	"github.com/nsbox/nsbox/sandbox/spec"
)

// Hostname is the sandbox's hostname (its own UTS namespace).
const Hostname = "nsbox"

// baseEnv is the program's whole environment before the policy's [env]:
// nothing of the host's environment is passed on.
var baseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/workspace",
	"LANG=C.UTF-8",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
}

// programEnv returns the base environment plus the policy's entries in a
// stable order (the policy loader rejects overriding the base names).
func programEnv(p *policies.Policy) []string {
	env := append([]string{}, baseEnv...)
	// Numeric libraries size their thread pools to the host's cores unless
	// told otherwise; more threads than the CPU quota only queue on it
	// (and count against pids.max).
	threads := fmt.Sprint(p.Limits.Threads())
	for _, k := range []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"} {
		env = append(env, k+"="+threads)
	}
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+p.Env[k])
	}
	return env
}

// programArgv runs the interpreter on the source it reads from stdin:
// -s keeps a user site directory out of sys.path; -P (Python 3.11+) keeps
// the cwd (/workspace) out of it too, so a module a run leaves in a reused
// workspace cannot shadow the standard library in the next; "-" reads the
// program from stdin (which is then at EOF for the program itself).
func programArgv(plan *hostroot.Plan) []string {
	return []string{plan.Interpreter, "-s", "-P", "-"}
}

func newSpec(p *policies.Policy, id string, plan *hostroot.Plan, binds []spec.Bind) *spec.Spec {
	links := make([]spec.Symlink, 0, len(plan.Symlinks))
	for _, l := range plan.Symlinks {
		links = append(links, spec.Symlink{Path: l.Path, Target: l.Target})
	}
	return &spec.Spec{
		Version:  spec.Version,
		RunID:    id,
		Symlinks: links,
		Binds:    binds,
		TmpSize:  int64(p.Filesystem.TmpSize),
		ShmSize:  int64(p.Filesystem.ShmSize),
		Hostname: Hostname,
		Argv:     programArgv(plan),
		Env:      programEnv(p),
		Cwd:      "/workspace",
		Passwd: fmt.Sprintf("root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"+
			"sandbox:x:%d:%d:nsbox sandbox:/workspace:/usr/sbin/nologin\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", spec.SandboxID, spec.SandboxID),
		Group: fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", spec.SandboxID),
	}
}
