package userns

import (
	"os"
	"strings"
)

// initialMap is /proc/self/uid_map in the host's initial user namespace:
// every id maps to itself.
const initialMap = "0 0 4294967295"

// Rootless reports whether this process runs without host root: outside
// the initial user namespace (inside nsbox's outer namespace, a container's
// or any other), or in it with a non-zero effective uid. It is what the
// plan, the cgroup code and the state directories consult; it never
// changes during a process's life.
func Rootless() bool {
	if os.Geteuid() != 0 {
		return true
	}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true // no /proc: nothing proves host root, so assume none
	}
	return !isInitialMap(string(b))
}

// NotRoot reports whether nsbox acts for another user than root: started
// by one, or in the outer namespace Enter made for one. Such a user's
// files live in its own XDG directories (StateHome, DataHome).
func NotRoot() bool { return os.Geteuid() != 0 || Outer() }

// isInitialMap reports whether uid_map content is the initial namespace's
// identity map.
func isInitialMap(s string) bool {
	return strings.Join(strings.Fields(s), " ") == initialMap
}
