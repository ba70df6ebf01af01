package spec

import "strings"

// The sandbox as the program sees it. These facts are shared by the
// supervisor, the init and the Python runner (which gets WritableDirs
// through its config); they are written here and nowhere else.

// Inside-the-sandbox identities. The init runs as RootID until it drops to
// SandboxID right before exec. Both map to unprivileged host ids of the
// run's own, never to host root: the supervisor allocates them per run
// (sandbox/supervisor/ids.go) and writes the maps before the init runs, so
// nothing inside depends on them.
const (
	RootID    = 0
	SandboxID = 1000
)

// Paths inside the sandbox.
const (
	// Workspace is the program's working directory and home, bound
	// read-write (noexec) from a host directory.
	Workspace = "/workspace"
	// Tmp and Shm are size-bounded tmpfs mounts, noexec.
	Tmp = "/tmp"
	Shm = "/dev/shm"
)

// WritableDirs are the only places the program can write: every other
// path is read-only (the root's mount flags, proven by the init) and,
// with Landlock, refused by a second fence. The runner's "open" denial
// uses the same list.
var WritableDirs = []string{Workspace, Tmp, Shm}

// Hostname is the sandbox's hostname (its own UTS namespace).
const Hostname = "nsbox"

// FDs is the descriptor layout of the init: which inherited descriptor
// carries what. It is assigned here, once; the supervisor passes its
// files in this order (os/exec's ExtraFiles, the first becoming 3) and
// names the numbers in the Spec, and the init acts only on the numbers
// the Spec names.
//
//	3       the sync socket                   --sync-fd
//	4       the root filesystem, detached     Spec.RootFD
//	5       /workspace, detached              Spec.Binds[0].FD
//	6       the runner's report pipe (write)  Spec.ReportFD
//	7...    cgroup v1 tasks files             Spec.CgroupTasks[i].FD
//	last    the reaper's exit pipe (write)    --status-fd
//
// The reaper (PID 1) hands every descriptor below --status-fd to the
// setup init it starts, at the same number, and keeps only the exit
// pipe, which the setup init never sees.
type FDs struct {
	Sync, Root, Workspace, Report int
	Tasks                         []int // one per v1 hierarchy; none on v2 or without a cgroup
	Status                        int
}

// firstFD is the first descriptor after stdin, stdout and stderr.
const firstFD = 3

// Layout assigns the descriptors of a run with tasks v1 tasks files.
func Layout(tasks int) FDs {
	l := FDs{Sync: firstFD, Root: firstFD + 1, Workspace: firstFD + 2, Report: firstFD + 3}
	for i := range tasks {
		l.Tasks = append(l.Tasks, l.Report+1+i)
	}
	l.Status = l.Report + 1 + tasks
	return l
}

// Count is the number of inherited descriptors beyond stdio.
func (l FDs) Count() int { return 5 + len(l.Tasks) }

// BaseEnv is the program's whole environment before the policy's [env]
// and ThreadEnv: nothing of the host's environment is passed on. A policy
// may not set these names.
var BaseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=" + Workspace,
	"LANG=C.UTF-8",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
}

// ProxyPort and ProxyAddr are where a run in network allowlist mode
// finds nsbox's proxy, on its own loopback (Spec.Proxy).
const (
	ProxyPort = 3128
	ProxyAddr = "127.0.0.1:3128"
)

// ProxyEnv is what points the program's HTTP clients (urllib, requests,
// httpx) at the proxy in allowlist mode: both spellings of each name,
// since clients differ in which they read, and an empty NO_PROXY so that
// no host, not even 127.0.0.1, bypasses it. A policy may not set these
// names.
var ProxyEnv = func() []string {
	url := "http://" + ProxyAddr
	var e []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		e = append(e, k+"="+url, strings.ToLower(k)+"="+url)
	}
	return append(e, "NO_PROXY=", "no_proxy=")
}()

// ThreadEnv are the thread-pool sizes of numeric libraries, set from the
// CPU quota: they size their pools to the host's cores unless told, and
// more threads than the quota only queue on it (and count against
// pids.max). A policy may not set these names either.
var ThreadEnv = []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}
