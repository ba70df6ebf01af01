package supervisor

import (
	"fmt"
	"sort"

	"github.com/nsbox/nsbox/policies"
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

// newSpec describes the run for the init; argv is the runner's command
// line (pyrunner.Argv): the interpreter with -S -s -P, the runner, its config.
func newSpec(p *policies.Policy, id string, argv []string, binds []spec.Bind) *spec.Spec {
	return &spec.Spec{
		Version:  spec.Version,
		RunID:    id,
		RootFD:   rootFD,
		Binds:    binds,
		TmpSize:  int64(p.Filesystem.TmpSize),
		ShmSize:  int64(p.Filesystem.ShmSize),
		Hostname: Hostname,
		Argv:     argv,
		Env:      programEnv(p),
		Cwd:      "/workspace",
	}
}
