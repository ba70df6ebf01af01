package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Supervisor identifies the nsbox process that began a row, so that any
// other process on the host can tell later whether it is still alive
// (package doc: Orphaned rows). A pid alone is not enough: pids are reused,
// and they mean something else in another PID namespace or after a reboot.
type Supervisor struct {
	MachineID  string `json:"machine_id"`  // /etc/machine-id, "" when unreadable: which machine
	BootID     string `json:"boot_id"`     // /proc/sys/kernel/random/boot_id: one value per boot of the kernel
	PID        int64  `json:"pid"`         // as seen in its PID namespace
	StartTicks int64  `json:"start_ticks"` // field 22 of /proc/PID/stat: when the process started, in clock ticks since boot
	Namespaces string `json:"namespaces"`  // its PID and time namespaces, as readlink /proc/self/ns/{pid,time} names them
}

// clockTick is the unit of /proc/PID/stat's start time: USER_HZ, which the
// kernel fixes at 100 for every architecture's user-space ABI.
const clockTick = 10 * time.Millisecond

// host is what this process knows about where it runs, read once: its own
// identity for the rows it begins, and what it needs to judge others' rows.
type host struct {
	self    *Supervisor // nil when /proc could not tell; the rows this process begins then carry none
	machine string      // /etc/machine-id, "" when unreadable
	bootID  string      // "" when unreadable: no row can be judged by boot
	ns      string      // this process's namespaces, as Supervisor.Namespaces
	// procOK: /proc shows this process's own PID namespace, so a pid read
	// there is the pid kill(2) takes. A /proc mounted from another PID
	// namespace would show other processes under the same numbers.
	procOK bool
	booted time.Time // wall-clock time of this boot (now minus CLOCK_BOOTTIME)
}

// thisHost reads the host facts once per process: a run begins one row, and
// a reaper judges many against the same facts.
var thisHost = sync.OnceValue(readHost)

func readHost() *host {
	h := &host{}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		h.machine = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h.bootID = strings.TrimSpace(string(b))
	}
	h.ns = namespaces("/proc/self/ns")
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err == nil {
		h.booted = time.Now().Add(-time.Duration(ts.Nano()))
	}
	pid := int64(os.Getpid())
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	h.procOK = err == nil && st.pid == pid
	if h.procOK && h.bootID != "" && h.ns != "" {
		h.self = &Supervisor{MachineID: h.machine, BootID: h.bootID, PID: pid, StartTicks: st.startTicks, Namespaces: h.ns}
	}
	return h
}

// namespaces names the PID and time namespaces of the process whose ns
// directory is dir: "pid:[N] time:[M]", or "pid:[N]" on kernels without
// time namespaces (before 5.6). Both matter: a pid means something only in
// its PID namespace, and the start time in /proc/PID/stat is shifted by the
// reader's time namespace. "" when the PID namespace cannot be read.
func namespaces(dir string) string {
	pid, err := os.Readlink(dir + "/pid")
	if err != nil {
		return ""
	}
	if t, err := os.Readlink(dir + "/time"); err == nil {
		return pid + " " + t
	}
	return pid
}

// procStat is what Reap reads of /proc/PID/stat.
type procStat struct {
	pid        int64
	state      byte  // field 3: R, S, D, Z (zombie), X (dead), ...
	startTicks int64 // field 22
}

// readStat reads and parses /proc/PID/stat. The second field, the command
// name in parentheses, may itself hold spaces and parentheses, so the
// fields after it are counted from its last ')'.
func readStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (procStat, error) {
	var st procStat
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || close < open {
		return st, errors.New("malformed stat: no (comm)")
	}
	pid, err := strconv.ParseInt(string(bytes.TrimSpace(b[:open])), 10, 64)
	if err != nil {
		return st, fmt.Errorf("malformed stat: pid: %w", err)
	}
	// After the comm: field 3 (state) is rest[0], field 22 is rest[19].
	rest := strings.Fields(string(b[close+1:]))
	if len(rest) < 20 || len(rest[0]) != 1 {
		return st, fmt.Errorf("malformed stat: %d fields after the command name", len(rest))
	}
	start, err := strconv.ParseInt(rest[19], 10, 64)
	if err != nil {
		return st, fmt.Errorf("malformed stat: start time: %w", err)
	}
	return procStat{pid: pid, state: rest[0][0], startTicks: start}, nil
}

// MaxRunAge is the longest a supervisor can keep a row unfinished: the
// longest run a policy allows (limits.timeout at most 24h) and a margin for
// everything around the program (building the sandbox, the kill and its
// cleanup, the bounded waits for the log's lock). A row that carries no
// supervisor identity this process can judge is taken for orphaned only
// once it is older than this.
const MaxRunAge = 25 * time.Hour

// verdict is what judge concludes about a row's supervisor.
type verdict struct {
	dead bool
	// by is the latest time the supervisor can have died, as far as the
	// evidence goes; the reaper records it as the row's end.
	by time.Time
}

// judge tells whether the supervisor sup of a row begun at start is gone
// for good, as seen from h at now. It errs only towards "alive": a row it
// cannot judge stays unfinished (package doc: Orphaned rows).
func (h *host) judge(sup *Supervisor, start, now time.Time) verdict {
	switch {
	case sup == nil || h.bootID == "" || sup.MachineID != h.machine:
		// No identity recorded (a row from before it was), or none to
		// compare with; or another machine's row, in a copy of its log
		// (SQLite in WAL mode needs every process of a database on one
		// host, so a shared log is always this machine's).
	case sup.BootID != h.bootID:
		// Recorded in another boot of this machine: every process of
		// that boot ended before this one began.
		return verdict{dead: true, by: h.booted}
	case sup.Namespaces == h.ns && h.procOK:
		return h.judgePid(sup, now)
	}
	// Another PID or time namespace, or no identity: the pid cannot be
	// checked from here, only the age.
	if now.Sub(start) > MaxRunAge {
		return verdict{dead: true, by: now}
	}
	return verdict{}
}

// judgePid checks a supervisor of this boot and these namespaces by its pid.
func (h *host) judgePid(sup *Supervisor, now time.Time) verdict {
	// kill(pid, 0) rather than /proc: /proc mounted with hidepid hides
	// other users' processes, which would look gone. ESRCH means no
	// process has the pid; EPERM, that one does.
	if sup.PID <= 0 || sup.PID > 1<<22 {
		return verdict{} // not a pid this kernel hands out: leave it
	}
	if err := unix.Kill(int(sup.PID), 0); errors.Is(err, unix.ESRCH) {
		return verdict{dead: true, by: now}
	}
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", sup.PID))
	if err != nil {
		// Hidden (hidepid), or gone since kill: the next reaper sees.
		return verdict{}
	}
	if st.startTicks != sup.StartTicks {
		// The pid was handed to another process: the supervisor was gone
		// before that process started, at the latest by the end of the
		// tick its start time names.
		if h.booted.IsZero() {
			return verdict{dead: true, by: now}
		}
		return verdict{dead: true, by: h.booted.Add(time.Duration(st.startTicks+1) * clockTick)}
	}
	if st.state == 'X' || st.state == 'Z' && zombieProcess(sup.PID) {
		// Dead, waiting for its parent to collect the exit status: it
		// will never finish its row.
		return verdict{dead: true, by: now}
	}
	return verdict{}
}

// zombieProcess reports whether a zombie pid is a whole process that
// exited, not a thread-group leader that exited alone while its other
// threads run on (the kernel shows that leader as a zombie too).
func zombieProcess(pid int64) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return err == nil && n <= 1
		}
	}
	return false
}
