// Package tests drives the real nsbox binary as root: real namespaces,
// real mounts, no mocked kernel. Each test attacks one protection from
// inside the sandbox and checks the host afterwards.
//
// Payloads are harmless even if uncontained: they touch only canaries the
// test creates, signal only the test's own processes, connect only to a
// 127.0.0.1 listener the test opens, and every loop is bounded.
package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// nsboxBin is the binary under test: $NSBOX_BIN (make test sets it) or one
// built into a temp dir by TestMain.
var nsboxBin string

func TestMain(m *testing.M) {
	code := func() int {
		unlock := takeIDRange()
		defer unlock()
		nsboxBin = os.Getenv("NSBOX_BIN")
		if nsboxBin == "" {
			dir, err := os.MkdirTemp("", "nsbox-test-bin")
			if err != nil {
				panic(err)
			}
			defer os.RemoveAll(dir)
			nsboxBin = filepath.Join(dir, "nsbox")
			// nsbox serve executes nsbox-serve from beside nsbox.
			for _, name := range []string{"nsbox", "nsbox-serve"} {
				cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../cmd/"+name)
				cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
				if out, err := cmd.CombinedOutput(); err != nil {
					os.Stderr.Write(out)
					panic("build " + name + ": " + err.Error())
				}
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// needRoot skips a test that needs root, unless NSBOX_MUST_WORK=1 (CI),
// where a skip would hide a broken protection: then it fails.
func needRoot(t *testing.T) {
	t.Helper()
	mustwork.NeedRoot(t)
}

// suiteIDs is the host id range of every run this test process starts
// (NSBOX_ID_RANGE, set for every child by takeIDRange): the sandboxes of
// this suite are the processes with an id in it, and no other suite's.
var suiteIDs supervisor.IDRange

// Blocks of host ids for test suites: far from supervisor.DefaultIDRange,
// one per concurrent suite.
const (
	suiteIDBase   = 2_100_000_000
	suiteIDCount  = 1024
	suiteIDBlocks = 64
)

// takeIDRange claims a block of host ids for this test process, locked
// for its whole life, and hands it to every nsbox it starts. Two suites
// at once (another worktree's, say) then run with disjoint ids: the
// cleanups below that kill a suite's leftover sandboxes never reach the
// other's.
func takeIDRange() (unlock func()) {
	dir := filepath.Join(os.TempDir(), "nsbox-test-ids")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	for i := range suiteIDBlocks {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			panic(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		suiteIDs = supervisor.IDRange{Base: suiteIDBase + uint32(i)*suiteIDCount, Count: suiteIDCount}
		os.Setenv("NSBOX_ID_RANGE", suiteIDs.String())
		return func() { f.Close() }
	}
	panic("no free block of test host ids in " + dir)
}

// inSuite reports whether host id (a decimal string) is one of this
// suite's.
func inSuite(id string) bool {
	n, err := strconv.ParseUint(id, 10, 32)
	return err == nil && n >= uint64(suiteIDs.Base) && n < uint64(suiteIDs.Base)+uint64(suiteIDs.Count)
}

// isProgramID reports whether host id is a program's (inside SandboxID),
// not an init's: the second of a run's pair.
func isProgramID(id uint32) bool {
	return inSuite(strconv.FormatUint(uint64(id), 10)) && (id-suiteIDs.Base)%supervisor.IDsPerRun == 1
}

// wsOwnerUID owns the directories sandboxWorkspace makes: a regular,
// unprivileged host uid (the sandbox's fixed uid before runs had their
// own), which the idmapped /workspace maps to the run's program.
const wsOwnerUID = 2_000_001_000

// run is one nsbox invocation.
type run struct {
	args      []string
	stdin     string
	env       []string          // added to the test's environment
	state     string            // NSBOX_STATE_DIR; a fresh one when ""
	via       []string          // a command that runs nsbox: via... NSBOX_BIN args...
	auditDB   string            // NSBOX_AUDIT_DB; STATE/audit.db when ""
	whileRuns func(*os.Process) // called once nsbox started
	binary    string            // the nsbox binary; nsboxBin when ""
}

// outcome is what an nsbox invocation produced.
type outcome struct {
	exit    int
	stdout  []byte
	stderr  []byte
	res     *result.Result // parsed when --json was given
	elapsed time.Duration
	rusage  *syscall.Rusage
	state   string
}

// nsbox runs the binary and, for --json runs, decodes the single result.
func nsbox(t *testing.T, r run) *outcome {
	t.Helper()
	if r.state == "" {
		r.state = t.TempDir()
	}
	if r.binary == "" {
		r.binary = nsboxBin
	}
	r.args = scaleBuiltinPolicy(t, r.args)
	argv := append(append(append([]string{}, r.via...), r.binary), r.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if r.auditDB == "" {
		r.auditDB = filepath.Join(r.state, "audit.db")
	}
	cmd.Env = append(append(os.Environ(), "NSBOX_STATE_DIR="+r.state, "NSBOX_AUDIT_DB="+r.auditDB), r.env...)
	if rootlessCorpus {
		asRootlessUser(t, cmd, r)
	}
	cmd.Stdin = strings.NewReader(r.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nsbox: %v", err)
	}
	if r.whileRuns != nil {
		r.whileRuns(cmd.Process)
	}
	err := cmd.Wait()
	o := &outcome{stdout: stdout.Bytes(), stderr: stderr.Bytes(), elapsed: time.Since(start), state: r.state}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait nsbox: %v", err)
	}
	o.exit = cmd.ProcessState.ExitCode()
	o.rusage, _ = cmd.ProcessState.SysUsage().(*syscall.Rusage)
	for _, a := range r.args {
		if a == "--json" && len(r.args) > 0 && r.args[0] == "run" {
			var res result.Result
			dec := json.NewDecoder(bytes.NewReader(o.stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&res); err != nil {
				t.Fatalf("nsbox --json printed no valid result: %v\nstdout: %s\nstderr: %s", err, o.stdout, o.stderr)
			}
			if dec.More() {
				t.Fatalf("nsbox --json printed more than one object: %s", o.stdout)
			}
			o.res = &res
		}
	}
	return o
}

// runPy runs code under a policy with --json and returns the outcome. A
// built-in policy name means its OS-only variant (osOnly): these tests
// attack the OS sandbox, which must hold by itself; the Python layer in
// front of it is tested with the real built-ins by runPyLayer.
func runPy(t *testing.T, policy, code string, extra ...string) *outcome {
	t.Helper()
	if !strings.Contains(policy, "/") {
		policy = osOnly(t, policy)
	}
	return runPyLayer(t, policy, code, extra...)
}

// runPyLayer runs code under exactly the policy given, Python layer and all.
func runPyLayer(t *testing.T, policy, code string, extra ...string) *outcome {
	t.Helper()
	args := append([]string{"run", "--json", "--policy", policy}, extra...)
	return nsbox(t, run{args: append(args, "-c", code)})
}

// osOnly writes a copy of the built-in policy name whose Python layer
// allows everything and denies nothing ([allowlist] as in permissive), so
// an attack reaches the OS sandbox, and returns its path.
func osOnly(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "policies", name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i, j := strings.Index(s, "\n[allowlist]\n"), strings.Index(s, "\n[audit]\n")
	if i < 0 || j < i {
		t.Fatalf("%s.toml has no [allowlist] before [audit]", name)
	}
	s = s[:i] + "\n[allowlist]\nimports = [\"*\"]\ndeny_builtins = []\ndeny_events = []\nstrict_attributes = false\n" + s[j:]
	s = strings.Replace(s, "\nmode = \"restricted\"\n", "\nmode = \"guarded\"\n", 1) // restricted needs strict_attributes
	s = scalePolicyTimeout(t, name, s)
	p := filepath.Join(t.TempDir(), name+"-os-only.toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantStatus fails the test unless the run ended with status.
func (o *outcome) wantStatus(t *testing.T, status result.Status) {
	t.Helper()
	if o.res == nil {
		t.Fatalf("no JSON result; exit %d, stderr: %s", o.exit, o.stderr)
	}
	if o.res.Status != status {
		t.Fatalf("status %q (reason %q, error %+v, exit_code %s, signal %s), want %q\nstdout: %s\nstderr: %s",
			o.res.Status, o.res.Reason, o.res.Error, ptr(o.res.ExitCode), ptr(o.res.Signal), status, o.res.Stdout, o.res.Stderr)
	}
}

// ptr prints a nullable result field.
func ptr(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

// noLeftovers checks that a run left no run directory behind.
func (o *outcome) noLeftovers(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(o.state, "runs"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read state dir: %v", err)
	}
	for _, e := range entries {
		t.Errorf("left behind: %s", filepath.Join(o.state, "runs", e.Name()))
	}
}

// sandboxProcesses lists live host pids of this suite's sandboxes: those
// with any uid of the suite's range.
func sandboxProcesses(t *testing.T) []string {
	t.Helper()
	var pids []string
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		// Zombies are dead (they wait for the host's init to reap them).
		if strings.Contains(string(b), "\nState:\tZ") {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 5 && f[0] == "Uid:" && slices.ContainsFunc(f[1:], inSuite) {
				pids = append(pids, d.Name())
			}
		}
	}
	return pids
}

// timeoutScale is NSBOX_TEST_TIMEOUT_SCALE (1 when unset): on a machine
// that runs everything several times slower (make test-v2's guest under
// software emulation), the policies' wall clocks and the tests' waits
// for a sandbox to get ready are multiplied by it. The limits under test
// (memory, pids, CPU time, explicit --timeout flags) never are.
var timeoutScale = func() float64 {
	s := os.Getenv("NSBOX_TEST_TIMEOUT_SCALE")
	if s == "" {
		return 1
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 1 || f > 100 {
		panic("NSBOX_TEST_TIMEOUT_SCALE=" + s + ": want a number from 1 to 100")
	}
	return f
}()

// scaled is d times timeoutScale.
func scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * timeoutScale)
}

// policyTimeout matches a policy's wall clock line.
var policyTimeout = regexp.MustCompile(`(?m)^timeout = "([0-9]+)s"$`)

// scalePolicyTimeout multiplies the wall clock of policy text (from name),
// if it has one, by timeoutScale.
//
// In the rootless corpus without a delegated cgroup it also drops
// "cgroups" from the requirements: the attacks run without one
// (TestRootlessRequiredCgroupFailsClosed tests the refusal).
func scalePolicyTimeout(t *testing.T, name, s string) string {
	t.Helper()
	if rootlessCorpus && !delegatedCgroup() {
		s = strings.Replace(s, `"cgroups", `, "", 1)
	}
	if timeoutScale == 1 {
		return s
	}
	m := policyTimeout.FindStringSubmatch(s)
	if m == nil {
		return s // no wall clock (permissive)
	}
	n, _ := strconv.Atoi(m[1])
	return policyTimeout.ReplaceAllString(s, fmt.Sprintf(`timeout = "%ds"`, int(float64(n)*timeoutScale)))
}

// scaleBuiltinPolicy gives a run under a built-in policy (by name, or the
// default when none is named) a copy of it with its wall clock scaled,
// when NSBOX_TEST_TIMEOUT_SCALE is set and the run has no --timeout of
// its own, and always in the rootless corpus (scalePolicyTimeout). Policy
// files the tests write (osOnly, writePolicy) are scaled when written.
func scaleBuiltinPolicy(t *testing.T, args []string) []string {
	t.Helper()
	if len(args) == 0 || args[0] != "run" || !rootlessCorpus && (timeoutScale == 1 || slices.Contains(args, "--timeout")) {
		return args
	}
	name, at := "default", -1
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "--policy" || args[i] == "-p" {
			name, at = args[i+1], i+1
			break
		}
		if args[i] == "-c" || args[i] == "-" {
			break
		}
	}
	if strings.ContainsAny(name, "/.") {
		return args
	}
	src, err := os.ReadFile(filepath.Join("..", "policies", name+".toml"))
	if err != nil {
		t.Fatalf("scale policy %s: %v", name, err)
	}
	p := filepath.Join(t.TempDir(), name+"-scaled.toml")
	if err := os.WriteFile(p, []byte(scalePolicyTimeout(t, name, string(src))), 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	out := slices.Clone(args)
	if at < 0 {
		return append([]string{out[0], "--policy", p}, out[1:]...)
	}
	out[at] = p
	return out
}

// waitFile polls until path exists or the deadline passes.
func waitFile(path string, d time.Duration) bool {
	deadline := time.Now().Add(scaled(d))
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// mustHave skips (or, under NSBOX_MUST_WORK, fails) a test that needs a
// host command.
func mustHave(t *testing.T, cmd string) {
	t.Helper()
	if _, err := exec.LookPath(cmd); err != nil {
		mustwork.Skip(t, "%s is not installed", cmd)
	}
}

// sandboxWorkspace returns a host dir for --workspace tests, owned by
// wsOwnerUID: idmapped, it is the program's to write.
func sandboxWorkspace(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if rootlessCorpus {
		// Rootless runs cannot idmap it, and the program's host uid is
		// one of the user's subordinate ids: writable by others.
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if err := os.Chown(dir, wsOwnerUID, wsOwnerUID); err != nil {
		t.Fatal(err)
	}
	return dir
}
