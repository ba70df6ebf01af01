package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// The stress suite's faults: each fault nsbox once had with its callers,
// its input, its audit log, its roots and its own memory is provoked again
// while the normal runs go on, and its fixed behaviour checked every time.
// The runs of the mix carry some of them (an aborting program, an orphan,
// timeouts under load); the rest need a caller that behaves badly, or are
// too dear for every tenth run, and run here:
//
//   - the caller closes nsbox's stdout or stderr, or sends SIGQUIT: the
//     run is killed, the reason names the stream, the row is finished;
//   - a program over limits.program_size (-c, a file, stdin), a FIFO or a
//     device as the program file, stdin that never ends: step input, a row,
//     within the run's timeout;
//   - a locked audit log: step audit, exit 125 after the bounded wait,
//     never a timeout (stressLockedAudit: once, overlapping everything);
//   - a flood of both streams past a big output cap: the supervisor holds
//     the cap once per stream and little more (its VmHWM, as the mix's);
//   - stdout on /dev/full: a non-zero exit and a line on stderr;
//   - --workspace on a directory of a regular user works (idmapped), on /
//     or /etc it is refused, and no message ever advises chown;
//   - --audit-db on a device: refused, nothing created beside it;
//   - a signal to the sandbox's PID 1 reaches the program;
//   - labels not UTF-8 or too many: step input, a row; a repeated
//     single-value flag refused; an unknown policy key gets no unrelated
//     "did you mean"; `ulimit -n 20` gets a hint;
//   - `rootfs build` SIGKILLed leaves no process and the next build
//     succeeds, and rebuilding a root never takes it from its runs
//     (stressRebuilds).
//
// A program nsbox should refuse or give up on but hangs on is killed
// after stressInputBound and reported, not left to the suite's timeout.
//
// The faults run in a state dir of their own, so the normal runs' checks
// between runs do not count them, and into the normal runs' audit log, so
// the suite's final checks (nothing left, one true row per run) do.

// stressFaults provokes the faults listed above with the state dir and
// audit log given.
type stressFaults struct {
	t      *testing.T
	state  string
	db     string
	record func(stressOut)

	dir       string // files the faults need
	small     string // strict, accepting programs of at most 1 KiB
	fifo      string // a FIFO nobody writes
	big       string // a program of 1 MiB and a byte
	unknown   string // a policy with an unknown key like no other
	misspelt  string // a policy with a misspelt key
	devBefore map[string]bool
	bigCap    stressProg
}

// stressBigCap is the output cap of the big-cap flood, and
// stressStreamSlack what the supervisor may hold beyond it per stream (its
// read buffer, the heads it keeps, the Go runtime and SQLite spread over
// both).
const (
	stressBigCap      = 16 << 20
	stressStreamSlack = 12 << 20
)

// stressBigCapFlood floods both streams past a cap of stressBigCap under
// --json: the result holds each stream's cap, and the supervisor no copy
// of it beyond that.
func stressBigCapFlood(policy string) stressProg {
	return stressProg{name: "bigcap-flood", policy: policy, code: fmt.Sprintf(`
import sys
chunk = b"x" * (1 << 20)
for _ in range(%d):
    sys.stdout.buffer.write(chunk)
    sys.stderr.buffer.write(chunk)
`, stressBigCap>>20+1), want: result.StatusOutputLimit, hwm: 2 * (stressBigCap + stressStreamSlack) >> 10,
		check: func(res *result.Result, exit int) string {
			if len(res.StdoutBytes()) != stressBigCap || len(res.StderrBytes()) != stressBigCap {
				return fmt.Sprintf("stdout %d, stderr %d bytes, want the cap, %d, of each", len(res.StdoutBytes()), len(res.StderrBytes()), stressBigCap)
			}
			return ""
		}}
}

func newStressFaults(t *testing.T, state, db string, record func(stressOut)) *stressFaults {
	f := &stressFaults{t: t, state: state, db: db, record: record, dir: t.TempDir()}
	f.fifo = filepath.Join(f.dir, "fifo")
	if err := syscall.Mkfifo(f.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f.big = f.write("big.py", strings.Repeat("#", 1<<20+1))
	f.small = f.write("small.toml", "extends = \"strict\"\n[limits]\nprogram_size = \"1KiB\"\n")
	f.unknown = f.write("unknown.toml", "extends = \"strict\"\n[limits]\nfoo = 1\n")
	f.misspelt = f.write("misspelt.toml", "extends = \"strict\"\n[limits]\ntimout = \"5s\"\n")
	f.devBefore = devEntries(t)
	f.bigCap = stressBigCapFlood(f.write("bigcap.toml", fmt.Sprintf("extends = \"default\"\n[limits]\noutput_limit = \"%dMiB\"\n", stressBigCap>>20)))
	return f
}

func (f *stressFaults) write(name, content string) string {
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// round provokes each fault once; round i picks the variants that differ
// from round to round.
func (f *stressFaults) round(i int) {
	for _, stream := range []string{"stdout", "stderr"} {
		f.record(f.closedStream(fmt.Sprintf("fault-%d-closed-%s", i, stream), stream))
	}
	f.record(f.sigquit(fmt.Sprintf("fault-%d-sigquit", i)))
	f.programInput(i)
	f.record(stressRun(f.state, f.db, fmt.Sprintf("fault-%d-bigcap", i), f.bigCap, -1))
	f.record(f.fullStdout(fmt.Sprintf("fault-%d-devfull", i)))
	f.workspaces(i)
	f.deviceAuditLogs(i)
	f.record(f.signalPID1(i))
	f.smallOnes(i)
}

// out is what an nsbox invocation of the faults did, for the suite's
// final checks of the audit log.
func (f *stressFaults) out(label, prog string, o *outcome) stressOut {
	s := stressOut{label: label, prog: prog, wall: o.elapsed, err: adviceToChown(o)}
	if o.res != nil {
		s.id, s.status, s.told = o.res.ID, o.res.Status, toldReason(o.res)
	}
	return s
}

// json runs nsbox run --json with args in the faults' state dir and log,
// labelled unless label is "".
func (f *stressFaults) json(label string, args ...string) *outcome {
	a := []string{"run", "--json"}
	if label != "" {
		a = append(a, "--label", "stress="+label)
	}
	return nsbox(f.t, run{state: f.state, auditDB: f.db, args: append(a, args...)})
}

// refusedAs checks that o is a sandbox_error of step, exit 125, whose
// message mentions each of mentions.
func refusedAs(o *outcome, step string, mentions ...string) error {
	if o.res == nil {
		return fmt.Errorf("no result; exit %d, stderr %q", o.exit, o.stderr)
	}
	if o.res.Status != result.StatusSandboxError || o.exit != result.ExitSandboxError || o.res.Error == nil || o.res.Error.Step != step {
		return fmt.Errorf("status %q, exit %d, error %+v; want sandbox_error, exit 125, step %s", o.res.Status, o.exit, o.res.Error, step)
	}
	for _, m := range mentions {
		if !strings.Contains(o.res.Error.Message, m) {
			return fmt.Errorf("error %q does not mention %q", o.res.Error.Message, m)
		}
	}
	return nil
}

// adviceToChown fails an outcome whose messages suggest changing the
// owner or mode of anything: never good advice for a system directory.
func adviceToChown(o *outcome) error {
	msgs := string(o.stderr)
	if o.res != nil {
		msgs += " " + o.res.Reason
		if o.res.Error != nil {
			msgs += " " + o.res.Error.Message
		}
	}
	if strings.Contains(msgs, "chown") || strings.Contains(msgs, "chmod") {
		return fmt.Errorf("a message advises chown/chmod: %q", msgs)
	}
	return nil
}

// closedStream: plain mode, the reader of stream goes away after one line
// (`nsbox run ... | head -1`). nsbox must not die of SIGPIPE but end the
// run as killed, exit 137, the reason naming the stream, the row finished.
func (f *stressFaults) closedStream(label, stream string) stressOut {
	code := printForever
	if stream == "stderr" {
		code = "import sys\n" + strings.Replace(printForever, `print("x" * 100)`, `print("x" * 100, file=sys.stderr)`, 1)
	}
	s := stressOut{label: label, prog: "closed-" + stream, status: result.StatusKilled, rowReason: "closed nsbox's " + stream}
	cmd := exec.Command(nsboxBin, "run", "--policy", "default", "--label", "stress="+label, "-c", code)
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+f.state, "NSBOX_AUDIT_DB="+f.db)
	var other bytes.Buffer
	var pipe io.ReadCloser
	var err error
	if stream == "stdout" {
		pipe, err = cmd.StdoutPipe()
		cmd.Stderr = &other
	} else {
		pipe, err = cmd.StderrPipe()
		cmd.Stdout = &other
	}
	if err != nil {
		s.err = err
		return s
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		s.err = err
		return s
	}
	_, rerr := bufio.NewReader(pipe).ReadString('\n')
	pipe.Close()
	err = cmd.Wait()
	s.wall = time.Since(start)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case rerr != nil:
		s.err = fmt.Errorf("read the first line of %s: %v (nsbox: %v, %.500s)", stream, rerr, err, other.Bytes())
	case ws.Signaled() || ws.ExitStatus() != result.ExitKilled:
		s.err = fmt.Errorf("nsbox ended with %v, want exit %d, not SIGPIPE; %.500s", err, result.ExitKilled, other.Bytes())
	case s.wall > 10*time.Second:
		s.err = fmt.Errorf("nsbox took %v to notice its reader was gone", s.wall)
	case stream == "stdout" && !strings.Contains(other.String(), "stdout"):
		s.err = fmt.Errorf("stderr %q does not say that stdout was closed", other.String())
	case strings.Contains(other.String(), "chown"):
		s.err = fmt.Errorf("a message advises chown: %q", other.String())
	}
	return s
}

// sigquit: SIGQUIT to nsbox stops the run like SIGTERM (killed, exit
// 137), rather than dumping goroutines and leaving the row unfinished.
func (f *stressFaults) sigquit(label string) stressOut {
	ws := sandboxWorkspace(f.t)
	var notReady bool
	o := nsbox(f.t, run{
		state: f.state, auditDB: f.db,
		args: []string{"run", "--json", "--policy", osOnly(f.t, "default"), "--workspace", ws, "--label", "stress=" + label, "-c", sleeperCode(20 * time.Second)},
		whileRuns: func(p *os.Process) {
			notReady = !waitFile(filepath.Join(ws, "ready"), 10*time.Second)
			p.Signal(syscall.SIGQUIT)
		},
	})
	s := f.out(label, "sigquit", o)
	switch {
	case notReady:
		s.err = fmt.Errorf("the program never got ready: %s", o.stderr)
	case o.res.Status != result.StatusKilled || o.exit != result.ExitKilled || strings.Contains(o.res.Stdout, "done"):
		s.err = fmt.Errorf("status %q, exit %d, stdout %q; want killed, exit 137", o.res.Status, o.exit, o.res.Stdout)
	}
	return s
}

// programInput: programs nsbox must refuse without reading them whole or
// waiting for them forever. Each is bad input (step input, exit 125, a
// row), refused within seconds; stdin that never ends within the run's
// timeout.
func (f *stressFaults) programInput(i int) {
	for _, tc := range []struct {
		name, stdin, mentions string
		args                  []string
	}{
		{"code-too-big", "", "larger than 1KiB", []string{"--policy", f.small, "-c", strings.Repeat("#", 1025)}},
		{"stdin-too-big", strings.Repeat("#", 4096), "larger than 1KiB", []string{"--policy", f.small, "-"}},
		{"file-too-big", "", "larger than 1MiB", []string{"--policy", "strict", f.big}},
		{"fifo", "", "not a regular file (a FIFO)", []string{"--policy", "strict", f.fifo}},
		{"device", "", "not a regular file (a device)", []string{"--policy", "strict", "/dev/zero"}},
	} {
		label := fmt.Sprintf("fault-%d-%s", i, tc.name)
		o := nsbox(f.t, run{state: f.state, auditDB: f.db, stdin: tc.stdin, whileRuns: killAfter(stressInputBound),
			args: append([]string{"run", "--json", "--label", "stress=" + label}, tc.args...)})
		s := f.out(label, tc.name, o)
		if o.elapsed >= stressInputBound {
			s.err = fmt.Errorf("nsbox still read its program after %v (killed)", o.elapsed)
		} else if err := refusedAs(o, "input", tc.mentions); err != nil {
			s.err = err
		} else if o.elapsed > 5*time.Second {
			s.err = fmt.Errorf("refusing took %v", o.elapsed)
		}
		f.record(s)
	}

	label := fmt.Sprintf("fault-%d-stdin-never-ends", i)
	s := stressOut{label: label, prog: "stdin-never-ends"}
	cmd := exec.Command(nsboxBin, "run", "--json", "--policy", "strict", "--timeout", "1s", "--label", "stress="+label, "-")
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+f.state, "NSBOX_AUDIT_DB="+f.db)
	r, w, err := os.Pipe() // the write end stays open until nsbox is done: stdin never ends
	if err != nil {
		s.err = err
		f.record(s)
		return
	}
	cmd.Stdin = r
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		s.err = err
		f.record(s)
		return
	}
	killAfter(stressInputBound)(cmd.Process)
	cmd.Wait()
	s.wall = time.Since(start)
	r.Close()
	w.Close()
	res, derr := decodeResult(stdout.Bytes())
	switch {
	case derr != nil:
		s.err = derr
	case res.Status != result.StatusSandboxError || res.Error == nil || res.Error.Step != "input" || !strings.Contains(res.Error.Message, "did not end within 1s"):
		s.err = fmt.Errorf("status %q, error %+v; want step input naming the 1s timeout", res.Status, res.Error)
	case s.wall > 5*time.Second:
		s.err = fmt.Errorf("nsbox waited %v for a program on stdin, want about the 1s timeout", s.wall)
	}
	if res != nil {
		s.id, s.status, s.told = res.ID, res.Status, toldReason(res)
	}
	f.record(s)
}

// stressInputBound is when a program nsbox should have refused or given
// up on is deemed to hang it: the process is killed and the fault
// reported, rather than the suite waiting for its own timeout.
const stressInputBound = 30 * time.Second

// killAfter is a run's whileRuns that SIGKILLs nsbox once d has passed,
// unless it ended before.
func killAfter(d time.Duration) func(*os.Process) {
	return func(p *os.Process) {
		time.AfterFunc(d, func() { p.Kill() }) // a no-op once nsbox was waited for
	}
}

// fullStdout: plain mode with stdout on /dev/full. The output is lost, so
// nsbox must say so and exit non-zero: killed while the program ran (137,
// the row killed), or reported after it ended (125, the row the
// program's own).
func (f *stressFaults) fullStdout(label string) stressOut {
	s := stressOut{label: label, prog: "devfull"}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		s.err = err
		return s
	}
	defer full.Close()
	cmd := exec.Command(nsboxBin, "run", "--policy", "default", "--label", "stress="+label, "-c", "print('hello')")
	cmd.Env = append(os.Environ(), "NSBOX_STATE_DIR="+f.state, "NSBOX_AUDIT_DB="+f.db)
	cmd.Stdout = full
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	s.wall = time.Since(start)
	var ee *exec.ExitError
	switch {
	case !errors.As(err, &ee):
		s.err = fmt.Errorf("nsbox with stdout on /dev/full ended with %v, want exit %d or %d", err, result.ExitKilled, result.ExitSandboxError)
	case ee.ExitCode() == result.ExitKilled:
		s.status, s.rowReason = result.StatusKilled, "stdout"
	case ee.ExitCode() == result.ExitSandboxError:
		s.status = result.StatusOK
	default:
		s.err = fmt.Errorf("nsbox with stdout on /dev/full ended with %v, want exit %d or %d", err, result.ExitKilled, result.ExitSandboxError)
	}
	if s.err == nil && (!strings.Contains(stderr.String(), "stdout") || !strings.Contains(stderr.String(), "no space left")) {
		s.err = fmt.Errorf("stderr %q does not report the failed write to stdout", stderr.String())
	}
	return s
}

// idmappedCode writes into /workspace, which its owner (a regular host
// user) lent it without a chown.
const idmappedCode = `
import os
st = os.stat("/workspace")
print("WS", st.st_uid, st.st_gid)
os.makedirs("/workspace/sub", exist_ok=True)
open("/workspace/sub/new.txt", "w").write("x")
`

// workspaces: a directory of a regular user is idmapped (the program owns
// it inside; what it creates is the owner's on the host); / and /etc are
// refused, and nothing advises changing them.
func (f *stressFaults) workspaces(i int) {
	const uid, gid = 4321, 4322
	label := fmt.Sprintf("fault-%d-idmapped", i)
	ws := filepath.Join(f.t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o750); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chown(ws, uid, gid); err != nil {
		f.t.Fatal(err)
	}
	o := f.json(label, "--policy", osOnly(f.t, "default"), "--workspace", ws, "-c", idmappedCode)
	s := f.out(label, "idmapped", o)
	if o.res.Status != result.StatusOK || !strings.Contains(o.res.Stdout, "WS 1000 1000") {
		s.err = fmt.Errorf("status %q, error %+v, stdout %q; want ok, the workspace the program's", o.res.Status, o.res.Error, o.res.Stdout)
	} else {
		for _, name := range []string{"sub", "sub/new.txt"} {
			fi, err := os.Lstat(filepath.Join(ws, name))
			if err != nil {
				s.err = fmt.Errorf("host: %v", err)
			} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
				s.err = fmt.Errorf("host: %s owned by %d:%d, want the workspace's owner %d:%d", name, st.Uid, st.Gid, uid, gid)
			}
		}
	}
	f.record(s)

	dir := []string{"/", "/etc"}[i%2]
	label = fmt.Sprintf("fault-%d-workspace-root", i)
	o = f.json(label, "--workspace", dir, "-c", "pass")
	s = f.out(label, "workspace-root", o)
	if err := refusedAs(o, "workspace", "owned by root", dir); err != nil && s.err == nil {
		s.err = err
	}
	f.record(s)
}

// deviceAuditLogs: --audit-db naming a device (directly or by a symlink)
// is refused as step audit, and nothing is created beside it: no journal
// in /dev. These runs write no row anywhere.
func (f *stressFaults) deviceAuditLogs(i int) {
	link := filepath.Join(f.t.TempDir(), "null")
	if err := os.Symlink(os.DevNull, link); err != nil {
		f.t.Fatal(err)
	}
	for _, db := range []string{"/dev/null", "/dev/full", link} {
		label := fmt.Sprintf("fault-%d-auditdb-%s", i, filepath.Base(db))
		o := nsbox(f.t, run{state: f.state, auditDB: db, args: []string{"run", "--json", "--label", "stress=" + label, "-c", "pass"}})
		s := f.out(label, "auditdb-device", o)
		s.noRow = true
		if err := refusedAs(o, "audit", "not a regular file (a device)"); err != nil {
			s.err = err
		}
		f.record(s)
	}
	if ents, _ := os.ReadDir(filepath.Dir(link)); len(ents) != 1 {
		f.t.Errorf("files beside the symlink to /dev/null used as the audit log: %d entries, want only the symlink", len(ents))
	}
	if added := lineDiff(mapKeys(devEntries(f.t)), mapKeys(f.devBefore)); len(added) > 0 {
		f.t.Errorf("files created in /dev: %v", added)
	}
}

// devEntries names the journal-like files in /dev (SQLite's beside a
// device it opened as a database).
func devEntries(t *testing.T) map[string]bool {
	ents, err := os.ReadDir("/dev")
	if err != nil {
		t.Errorf("read /dev: %v", err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, "-journal") || strings.HasSuffix(n, "-wal") || strings.HasSuffix(n, "-shm") {
			m[n] = true
		}
	}
	return m
}

func mapKeys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// signalPID1: a signal sent from the host to the sandbox's PID 1 (the
// reaper) reaches the program, which handles it (SIGUSR1: exit 3) or dies
// of it (SIGTERM); the result reports the program's own end.
func (f *stressFaults) signalPID1(i int) stressOut {
	sig, exit, sigNum, stdout := syscall.SIGUSR1, 3, 0, "got SIGUSR1"
	if i%2 == 1 {
		sig, exit, sigNum, stdout = syscall.SIGTERM, 128+15, 15, ""
	}
	policy := []string{"strict", "default"}[i/2%2]
	label := fmt.Sprintf("fault-%d-signal-%s-%s", i, policy, sig)
	var sent error
	// No --workspace: sandboxOf would take the idmap helper nsbox starts
	// for one, also a child in a user namespace of its own, for the init.
	o := nsbox(f.t, run{
		state: f.state, auditDB: f.db,
		args: []string{"run", "--json", "--policy", osOnly(f.t, policy), "--label", "stress=" + label, "-c", signalCode},
		whileRuns: func(p *os.Process) {
			pid1 := sandboxOf(f.t, p.Pid, 10*time.Second)
			if !waitFile(fmt.Sprintf("/proc/%d/root/workspace/ready", pid1), 10*time.Second) {
				sent = errors.New("the program never got ready")
				p.Signal(syscall.SIGTERM)
				return
			}
			sent = syscall.Kill(pid1, sig)
		},
	})
	s := f.out(label, "signal-pid1", o)
	switch {
	case sent != nil:
		s.err = fmt.Errorf("signal the sandbox: %v", sent)
	case o.exit != exit || o.res.Status != result.StatusError:
		s.err = fmt.Errorf("status %q, exit %d, want error, exit %d; stdout %q", o.res.Status, o.exit, exit, o.res.Stdout)
	case sigNum != 0 && (o.res.Signal == nil || *o.res.Signal != sigNum):
		s.err = fmt.Errorf("signal %s, want %d", ptr(o.res.Signal), sigNum)
	case !strings.Contains(o.res.Stdout, stdout) || strings.Contains(o.res.Stdout, "no signal came"):
		s.err = fmt.Errorf("stdout %q, want %q", o.res.Stdout, stdout)
	}
	return s
}

// repeatedFlags are command lines whose single-value flag is given twice.
var repeatedFlags = [][]string{
	{"-c", "print(1)", "-c", "print(2)"},
	{"--code", "print(1)", "-c", "print(2)"},
	{"--policy", "strict", "-p", "default", "-c", "pass"},
	{"--timeout", "1s", "--timeout", "2s", "-c", "pass"},
	{"--workspace", "/tmp", "--workspace", "/tmp", "-c", "pass"},
}

// smallOnes: bad labels are bad input with a row; a repeated flag is
// refused; an unknown policy key gets no unrelated suggestion (and a
// misspelt one the right one); a caller out of descriptors gets a hint.
func (f *stressFaults) smallOnes(i int) {
	for _, tc := range []struct {
		name, mentions string
		args           []string
	}{
		{"label-not-utf8", "UTF-8", []string{"--label", "k=caf\xe9", "-c", "pass"}},
		{"too-many-labels", "at most 32 labels", append(manyLabelFlags(33), "-c", "pass")},
	} {
		label := fmt.Sprintf("fault-%d-%s", i, tc.name)
		o := f.json("", tc.args...)
		s := f.out(label, tc.name, o)
		if err := refusedAs(o, "input", tc.mentions); err != nil {
			s.err = err
		}
		f.record(s)
	}

	for j, args := range repeatedFlags {
		label := fmt.Sprintf("fault-%d-repeated-%d", i, j)
		o := f.json(label, args...)
		s := f.out(label, "repeated-flag", o)
		s.rowOptional = true // refused as a usage error, before the log is known
		if err := refusedAs(o, "input", "more than once"); err != nil {
			s.err = fmt.Errorf("%q: %v", args, err)
		}
		f.record(s)
	}

	label := fmt.Sprintf("fault-%d-unknown-key", i)
	o := f.json(label, "--policy", f.unknown, "-c", "pass")
	s := f.out(label, "unknown-key", o)
	if err := refusedAs(o, "policy", "limits.foo: unknown key"); err != nil {
		s.err = err
	} else if strings.Contains(o.res.Error.Message, "did you mean") || strings.Contains(o.res.Error.Message, "belongs") {
		s.err = fmt.Errorf("an unrelated suggestion for foo: %q", o.res.Error.Message)
	}
	f.record(s)
	label = fmt.Sprintf("fault-%d-misspelt-key", i)
	o = f.json(label, "--policy", f.misspelt, "-c", "pass")
	s = f.out(label, "misspelt-key", o)
	if err := refusedAs(o, "policy", `did you mean "timeout"?`); err != nil {
		s.err = err
	}
	f.record(s)

	// Out of descriptors, nsbox fails at whichever step needs one first,
	// before or after its row: the row is optional, the hint is not.
	label = fmt.Sprintf("fault-%d-ulimit", i)
	o = nsbox(f.t, run{state: f.state, auditDB: f.db, via: []string{"sh", "-c", `ulimit -n 20 && exec "$0" "$@"`},
		args: []string{"run", "--json", "--label", "stress=" + label, "-c", "pass"}})
	s = f.out(label, "ulimit", o)
	s.rowOptional = true
	step := ""
	if o.res.Error != nil {
		step = o.res.Error.Step
	}
	if err := refusedAs(o, step, "ulimit -n"); err != nil {
		s.err = err
	}
	f.record(s)
}

// stressRebuilds: a root of its own (never the shared ones) is built;
// then n times two runs start on it and hold it, a rebuild is SIGKILLed
// while it compiles (no process of it may be left, the root still
// verifies), the next build succeeds while the runs hold their
// generation, a new run uses the new one, and the held runs finish having
// lost nothing. A sweep then leaves only the current generation.
func (f *stressFaults) stressRebuilds(n int) {
	t := f.t
	out := filepath.Join(t.TempDir(), "root")
	buildRoot(t, "", out)
	pol := rootPolicyLong(t, out)
	for i := range n {
		held := startHeldRunsIn(t, pol, 2, run{state: f.state, auditDB: f.db}, func(j int) []string {
			return []string{"--label", fmt.Sprintf("stress=held-%d-%d", i, j)}
		})
		finished := false
		defer func() {
			if !finished { // a step failed the test: let the runs end
				held.finish(t)
			}
		}()
		if left := killBuildCompiling(t, out); len(left) > 0 {
			t.Errorf("killed build %d: processes still running: %v", i, left)
		}
		if o := nsbox(t, run{args: []string{"rootfs", "verify", out}}); o.exit != 0 {
			t.Errorf("killed build %d: the root does not verify: %s%s", i, o.stdout, o.stderr)
		}
		buildRoot(t, "", out)
		label := fmt.Sprintf("rebuilt-%d", i)
		o := f.json(label, "--policy", pol, "-c", "import decimal; print('ok')")
		s := f.out(label, "rebuilt", o)
		if o.res.Status != result.StatusOK {
			s.err = fmt.Errorf("a run on the rebuilt root: status %q, error %+v, stderr %q", o.res.Status, o.res.Error, o.res.Stderr)
		}
		f.record(s)
		finished = true
		if lost := held.finish(t); lost > 0 {
			t.Errorf("%d of 2 runs lost their root across rebuild %d", lost, i)
		}
		for j, o := range held.outs {
			f.record(f.out(fmt.Sprintf("held-%d-%d", i, j), "held", o))
		}
	}
	if kept := sweep(t, out); len(kept) > 0 {
		t.Errorf("sweep after the held runs ended kept %v", kept)
	}
	onlyCurrent(t, out)
}

// stressLockedAudit holds the write lock of an audit log of its own while
// a run is asked to record itself there. Started at once, it runs beside
// everything else (the wait is bounded at 30 s); wait reports.
func stressLockedAudit(t *testing.T, state string, record func(stressOut)) (wait func()) {
	db := filepath.Join(t.TempDir(), "locked.db")
	if o := nsbox(t, run{state: state, auditDB: db, args: []string{"run", "-c", "pass"}}); o.exit != 0 {
		t.Fatalf("first run into %s: exit %d: %s", db, o.exit, o.stderr)
	}
	release := holdAuditLock(t, db)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer release()
		o := nsbox(t, run{state: state, auditDB: db, args: []string{"run", "--json", "--timeout", "2s", "-c", "print(1)"}})
		s := stressOut{label: "locked-audit", prog: "locked-audit", wall: o.elapsed, noRow: true}
		if o.res != nil {
			s.id, s.status = o.res.ID, o.res.Status
		}
		switch err := refusedAs(o, "audit", "locked"); {
		case err != nil:
			s.err = err
		case o.res.Stdout != "" || o.res.ExitCode != nil:
			s.err = fmt.Errorf("the program ran: stdout %q, exit code %s", o.res.Stdout, ptr(o.res.ExitCode))
		case o.elapsed > 45*time.Second:
			s.err = fmt.Errorf("refused after %v, want the documented bound (30 s) and a little", o.elapsed)
		}
		record(s)
		release()
		if v := nsbox(t, run{args: []string{"audit", "verify", "--audit-db", db}}); v.exit != 0 {
			t.Errorf("audit verify of the log that was locked: exit %d: %s%s", v.exit, v.stdout, v.stderr)
		}
		if rows := rawRuns(t, db); len(rows) != 1 {
			t.Errorf("the log that was locked has %d rows, want the first run's only", len(rows))
		}
	}()
	return wg.Wait
}
