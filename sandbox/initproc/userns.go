package initproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// usernsLimits are the per-user limits of the run's own user namespace,
// /proc/sys/user/NAME. The kernel counts these objects per user at every
// level of user namespaces up to the host: a user of this namespace is
// checked against these values, and the namespace's owner (the run's own
// host uid) against the host's. The host's values are sized for a whole
// machine; these are sized for one Python program. A file this kernel
// lacks is skipped: it also lacks what the file would count.
var usernsLimits = []struct {
	name  string
	value int
}{
	// No namespaces: the program has no use for them, and a user
	// namespace of its own would give it capabilities over it.
	{"max_user_namespaces", 0},
	{"max_pid_namespaces", 0},
	{"max_uts_namespaces", 0},
	{"max_ipc_namespaces", 0},
	{"max_net_namespaces", 0},
	{"max_mnt_namespaces", 0},
	{"max_cgroup_namespaces", 0},
	{"max_time_namespaces", 0},
	// File watching: enough for a watcher library, a small share of
	// kernel memory.
	{"max_inotify_instances", 32},
	{"max_inotify_watches", 8192},
	// fanotify needs capabilities the program does not have; none.
	{"max_fanotify_groups", 0},
	{"max_fanotify_marks", 0},
}

// setUsernsLimits writes usernsLimits through the procfs at proc. The
// sysctls under user/ are those of the writer's user namespace, whatever
// procfs the path is on, and writable only with CAP_SYS_RESOURCE in it:
// the init, before it drops its capabilities. Each is read back.
func setUsernsLimits(proc string) error {
	for _, l := range usernsLimits {
		p := filepath.Join(proc, "sys", "user", l.name)
		want := strconv.Itoa(l.value)
		if err := os.WriteFile(p, []byte(want+"\n"), 0); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return fmt.Errorf("write %s: %w", p, err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if got := strings.TrimSpace(string(b)); got != want {
			return fmt.Errorf("%s is %s after writing %s", p, got, want)
		}
	}
	return nil
}
