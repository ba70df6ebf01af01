package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/result"
)

// fillCode fills /workspace from inside: with kind "bytes", files of
// chunkMiB MiB (below RLIMIT_FSIZE) up to maxMiB in all; with "inodes",
// up to max empty files. It stops at the first error, prints what it
// managed and exits 0: a program that handles ENOSPC is still ok. With
// hold, it then renames /workspace/filling to ready and waits (at most
// 20 s) until the host renames wait to go: renames need no free inode.
func fillCode(kind string, chunkMiB, max int, hold bool) string {
	py := "True"
	if !hold {
		py = "False"
	}
	return fmt.Sprintf(`
import errno, os, time
kind, chunk, limit, hold = %q, %d, %d, %s
if hold:
    open("/workspace/filling", "w").close()
    open("/workspace/wait", "w").close()
done, err = 0, "none"
try:
    if kind == "bytes":
        block = b"x" * (1 << 20)
        while done < limit:
            with open("/workspace/fill%%d" %% (done // chunk), "ab") as f:
                f.write(block)
            done += 1
    else:
        os.mkdir("/workspace/d")
        while done < limit:
            open("/workspace/d/%%d" %% done, "w").close()
            done += 1
except OSError as e:
    err = errno.errorcode[e.errno]
print("FILLED", kind, done, err, flush=True)
if hold:
    os.rename("/workspace/filling", "/workspace/ready")
    for _ in range(400):
        if os.path.exists("/workspace/go"):
            break
        time.sleep(0.05)
`, kind, chunkMiB, max, py)
}

// waitFull waits until the program of a fillCode run with hold, started
// by nsbox process p, has filled its workspace, and returns a function
// that releases the program.
func waitFull(t *testing.T, p *os.Process) (release func()) {
	t.Helper()
	root := fmt.Sprintf("/proc/%d/root/workspace", sandboxOf(t, p.Pid, 10*time.Second))
	if !waitFile(root+"/ready", 20*time.Second) {
		t.Errorf("the program never filled the workspace")
	}
	return releaser(t, root)
}

// waitFilled is waitFull for a caller that wants to see the run's own
// result when the program does not fill within d: it reports instead of
// failing.
func waitFilled(t *testing.T, p *os.Process, d time.Duration) bool {
	t.Helper()
	root := fmt.Sprintf("/proc/%d/root/workspace", sandboxOf(t, p.Pid, 10*time.Second))
	return waitFile(root+"/ready", d)
}

// releaser returns a function that lets a held fillCode program end.
func releaser(t *testing.T, root string) func() {
	return func() {
		if err := os.Rename(root+"/wait", root+"/go"); err != nil {
			t.Errorf("release the program: %v", err)
		}
	}
}

// sandboxOf returns the host pid of the sandbox's PID 1 (the program):
// the child of the nsbox process in a user namespace of its own.
func sandboxOf(t *testing.T, nsboxPid int, within time.Duration) int {
	t.Helper()
	want := "PPid:\t" + strconv.Itoa(nsboxPid) + "\n"
	within = scaled(within)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatalf("read /proc: %v", err)
		}
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
			// The init is in the run's user namespace; any other child
			// (a base root build's) is not, and the idmap helper of a
			// --workspace (in a user namespace of its own) is named so.
			if err == nil && strings.Contains(string(b), want) && otherUserNS(pid) && !isIdmapHelper(pid) {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nsbox (pid %d) started no sandbox within %v", nsboxPid, within)
	return 0
}

// isIdmapHelper reports whether process pid is the supervisor's
// nsbox-idmap helper, which holds an idmapped --workspace's user
// namespace while the run starts.
func isIdmapHelper(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.HasPrefix(string(b), "nsbox-idmap\x00")
}

// otherUserNS reports whether process pid is in another user namespace
// than the test.
func otherUserNS(pid int) bool {
	mine, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return false
	}
	its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
	return err == nil && its != mine
}

// fsFree is the free bytes (for unprivileged writers) and free inodes of
// the filesystem holding path.
func fsFree(t *testing.T, path string) (bytes, inodes int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Ffree)
}

// hostMounts returns the mount points of the host's mount namespace.
func hostMounts(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 {
			out = append(out, fs[4])
		}
	}
	return out
}

// workspaceCase is one policy under attack, with its workspace bounds.
type workspaceCase struct {
	name, policy       string // the built-in, and the file or name run
	size, inodes       int64
	chunkMiB, fileSize int64
}

func workspaceCases(t *testing.T) []workspaceCase {
	t.Helper()
	var cases []workspaceCase
	for _, name := range []string{"permissive", "default", "strict"} {
		p, err := policies.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		pol := name // permissive's Python layer already allows everything
		if name != "permissive" {
			pol = osOnly(t, name)
		}
		// A loaded host must not turn a slow fill into a timeout (strict
		// has 10 s): a minute, the attack's own bound.
		pol = withMinute(t, pol)
		fileSize := int64(p.Limits.FileSize)
		cases = append(cases, workspaceCase{name: name, policy: pol,
			size: int64(p.Limits.WorkspaceSize), inodes: p.Limits.WorkspaceInodes,
			chunkMiB: fileSize / 2 >> 20, fileSize: fileSize})
	}
	return cases
}

// TestWorkspaceBounded attacks the fresh /workspace under permissive,
// default and strict: twice its size in bytes, then twice its inodes in
// empty files. Each attack must stop with ENOSPC at the bound, the result
// must name the limit (status still ok: the program handled it), the
// bytes must count in the run's memory, and the host filesystem that held the workspace before (the state directory's)
// must not lose more than the bound while the workspace is full. No
// mount appears on the host, during or after, and the run directory goes.
func TestWorkspaceBounded(t *testing.T) {
	needRoot(t)
	for _, c := range workspaceCases(t) {
		for _, kind := range []string{"bytes", "inodes"} {
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				limit, bound, want := 2*int(c.size>>20), c.size>>20, result.ReachedWorkspaceSize
				if kind == "inodes" {
					limit, bound, want = 2*int(c.inodes), c.inodes, result.ReachedWorkspaceInodes
				}
				state := t.TempDir()
				mountsBefore := hostMounts(t)
				freeBytes, freeInodes := fsFree(t, state)
				var lostBytes, lostInodes int64
				var mountsDuring []string
				o := nsbox(t, run{
					args:  []string{"run", "--json", "--policy", c.policy, "-c", fillCode(kind, int(c.chunkMiB), limit, true)},
					state: state,
					whileRuns: func(p *os.Process) {
						release := waitFull(t, p)
						b, i := fsFree(t, state)
						lostBytes, lostInodes = freeBytes-b, freeInodes-i
						mountsDuring = hostMounts(t)
						release()
					},
				})
				o.wantStatus(t, result.StatusOK)
				var done int64
				var errno string
				if _, err := fmt.Sscanf(o.res.Stdout, "FILLED "+kind+" %d %s", &done, &errno); err != nil {
					t.Fatalf("unexpected output %q: %v", o.res.Stdout, err)
				}
				if errno != "ENOSPC" || done == 0 || done > bound {
					t.Errorf("%s: filled %d (MiB or files) and stopped with %s, want 1..%d and ENOSPC", kind, done, errno, bound)
				}
				// The workspace's pages are the run's memory: charged to the
				// cgroup of the program that wrote them.
				if kind == "bytes" && (o.res.PeakMemoryBytes == nil || *o.res.PeakMemoryBytes < done<<20) {
					t.Errorf("peak_memory_bytes %v after writing %d MiB to the workspace: its pages are not charged to the run", o.res.PeakMemoryBytes, done)
				}
				if !slices.Contains(o.res.LimitsReached, want) || o.res.Limit != "" {
					t.Errorf("limits_reached %v limit %q, want %q listed and no limit", o.res.LimitsReached, o.res.Limit, want)
				}
				if l := o.res.Limits; l == nil || l.WorkspaceBytes == nil || *l.WorkspaceBytes != c.size ||
					l.WorkspaceInodes == nil || *l.WorkspaceInodes != c.inodes {
					t.Errorf("result limits %+v, want workspace %d bytes, %d inodes", l, c.size, c.inodes)
				}
				if lostBytes > c.size || lostInodes > c.inodes {
					t.Errorf("the host filesystem lost %d bytes and %d inodes to a full workspace, more than its %d bytes and %d inodes",
						lostBytes, lostInodes, c.size, c.inodes)
				}
				if extra := without(mountsDuring, mountsBefore); len(extra) > 0 {
					t.Errorf("the workspace is mounted on the host during the run: %v", extra)
				}
				if extra := without(hostMounts(t), mountsBefore); len(extra) > 0 {
					t.Errorf("mounts left on the host: %v", extra)
				}
				o.noLeftovers(t)
			})
		}
	}
}

// withMinute writes a policy extending pol (a built-in name or a path)
// with a one-minute wall clock and CPU time, and returns its path.
func withMinute(t *testing.T, pol string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "minute.toml")
	src := fmt.Sprintf("extends = %q\n[limits]\ntimeout = \"60s\"\ncpu_time = \"60s\"\n", pol)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// shmem is the host's Shmem from /proc/meminfo (every tmpfs page), in
// bytes.
func shmem(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Shmem:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("meminfo Shmem %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no Shmem in /proc/meminfo")
	return 0
}

// TestWorkspaceGoesWithKilledSupervisor fills strict's workspace, then
// SIGKILLs nsbox: no unmount runs, yet the workspace's memory must come
// back (the tmpfs dies with the sandbox's mount namespace), no mount is
// left on the host, and the next run sweeps the run directory.
func TestWorkspaceGoesWithKilledSupervisor(t *testing.T) {
	needRoot(t)
	var c workspaceCase
	for _, wc := range workspaceCases(t) {
		if wc.name == "strict" {
			c = wc
		}
	}
	state := t.TempDir()
	pol := c.policy // a minute (workspaceCases): the kill ends it
	mountsBefore := hostMounts(t)
	before := shmem(t)
	var full int64
	filled := false
	o := nsbox(t, run{
		args:  []string{"run", "--policy", pol, "-c", fillCode("bytes", int(c.chunkMiB), 2*int(c.size>>20), true)},
		state: state,
		whileRuns: func(p *os.Process) {
			if filled = waitFilled(t, p, 40*time.Second); !filled {
				return // let the run end by itself: its result says why
			}
			full = shmem(t)
			p.Signal(syscall.SIGKILL)
		},
	})
	if !filled {
		t.Fatalf("the program never filled the workspace: exit %d\nstdout: %s\nstderr: %s", o.exit, o.stdout, o.stderr)
	}
	if full-before < c.size/2 {
		t.Fatalf("host Shmem grew by %d bytes with the workspace full, want about %d: is the workspace a tmpfs?", full-before, c.size)
	}
	deadline := time.Now().Add(5 * time.Second)
	for shmem(t) > before+c.size/4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if now := shmem(t); now > before+c.size/4 {
		t.Errorf("the killed run's workspace still holds memory: Shmem %d before, %d full, %d after", before, full, now)
	}
	if extra := without(hostMounts(t), mountsBefore); len(extra) > 0 {
		t.Errorf("mounts left on the host: %v", extra)
	}
	runs, _ := os.ReadDir(filepath.Join(state, "runs"))
	if len(runs) != 1 {
		t.Fatalf("want the killed run's directory left behind, found %d entries", len(runs))
	}
	o = nsbox(t, run{args: []string{"run", "--json", "-c", "pass"}, state: state})
	o.wantStatus(t, result.StatusOK)
	o.noLeftovers(t)
}

// TestBoundedWorkspaceRequired: a policy that requires bounded_workspace
// refuses a --workspace directory on the host's big filesystem before
// anything runs, naming the directory and the requirement; it accepts one
// on a filesystem no larger than its bounds (a small tmpfs the test
// mounts), which then fills with ENOSPC and is reported. Without the
// requirement, the big filesystem's directory runs and the result says
// that nothing bounds it.
func TestBoundedWorkspaceRequired(t *testing.T) {
	needRoot(t)
	pol := filepath.Join(t.TempDir(), "bounded.toml")
	if err := os.WriteFile(pol, []byte(`extends = "permissive"
[sandbox]
require_add = ["bounded_workspace"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	canary := "open('/workspace/ran', 'w').write('x')\n"

	big := sandboxWorkspace(t)
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", pol, "--workspace", big, "-c", canary}})
	o.wantStatus(t, result.StatusSandboxError)
	if o.exit != result.ExitSandboxError || o.res.Error == nil || o.res.Error.Step != "workspace" ||
		!strings.Contains(o.res.Error.Message, big) || !strings.Contains(o.res.Error.Message, "bounded_workspace") {
		t.Errorf("exit %d, error %+v: want 125 at step workspace naming %s and bounded_workspace", o.exit, o.res.Error, big)
	}
	if _, err := os.Stat(filepath.Join(big, "ran")); err == nil {
		t.Error("the program ran in an unbounded workspace the policy refuses")
	}

	o = nsbox(t, run{args: []string{"run", "--json", "--policy", "permissive", "--workspace", big, "-c", canary}})
	o.wantStatus(t, result.StatusOK)
	if l := o.res.Limits; l == nil || l.WorkspaceBytes != nil || l.WorkspaceInodes != nil {
		t.Errorf("an unbounded --workspace reported as bounded: %+v", l)
	}

	small := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(small, 0o700); err != nil {
		t.Fatal(err)
	}
	// Owned by a user of its own, as a caller's directory is: the run
	// idmaps it to its program.
	opts := "size=8m,nr_inodes=64,mode=0700,uid=4242,gid=4242"
	if err := unix.Mount("tmpfs", small, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(small, unix.MNT_DETACH) })
	o = nsbox(t, run{args: []string{"run", "--json", "--policy", pol, "--workspace", small, "-c", fillCode("bytes", 4, 16, false) + "\n" + canary}})
	o.wantStatus(t, result.StatusOK)
	if !strings.HasPrefix(o.res.Stdout, "FILLED bytes ") || !strings.HasSuffix(strings.TrimSpace(o.res.Stdout), " ENOSPC") {
		t.Errorf("want the 8 MiB workspace full with ENOSPC: %q", o.res.Stdout)
	}
	if l := o.res.Limits; l == nil || l.WorkspaceBytes == nil || *l.WorkspaceBytes != 8<<20 || l.WorkspaceInodes == nil || *l.WorkspaceInodes != 64 {
		t.Errorf("result limits %+v, want the small filesystem's 8 MiB and 64 inodes", l)
	}
	if !slices.Contains(o.res.LimitsReached, result.ReachedWorkspaceSize) {
		t.Errorf("limits_reached %v, want %s", o.res.LimitsReached, result.ReachedWorkspaceSize)
	}
}
