package initproc

import "strconv"

// Command is the argument that selects the init: the supervisor starts
// the reaper as "<binary> init --sync-fd N --status-fd M", where the
// binary is nsbox-init or nsbox itself (its hidden init command), and
// the reaper starts the setup init as "<binary> init --sync-fd N".
const Command = "init"

// Invocation is what the init's command line selects.
type Invocation struct {
	SyncFD int
	// StatusFD is the reaper's exit pipe; -1 for the setup init.
	StatusFD int
}

// Reaper reports whether inv starts the reaper (PID 1) rather than the
// setup init.
func (inv Invocation) Reaper() bool { return inv.StatusFD >= 0 }

// Args recognises the exact command lines of the reaper and of the setup
// init and returns what they select. Any other form, including a
// non-canonical number ("010" is 8 to the flag package) or a missing or
// negative one, is refused (nsbox leaves it to its cli App).
func Args(args []string) (inv Invocation, ok bool) {
	if (len(args) != 4 && len(args) != 6) || args[1] != Command || args[2] != "--sync-fd" {
		return Invocation{}, false
	}
	inv = Invocation{StatusFD: -1}
	if inv.SyncFD, ok = fdArg(args[3]); !ok {
		return Invocation{}, false
	}
	if len(args) == 6 {
		if args[4] != "--status-fd" {
			return Invocation{}, false
		}
		if inv.StatusFD, ok = fdArg(args[5]); !ok || inv.StatusFD <= inv.SyncFD {
			return Invocation{}, false
		}
	}
	return inv, true
}

// fdArg parses a descriptor number written canonically.
func fdArg(s string) (int, bool) {
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 0 || strconv.Itoa(fd) != s {
		return 0, false
	}
	return fd, true
}

// argv is the command line that selects inv (the inverse of Args).
func (inv Invocation) argv() []string {
	a := []string{"nsbox", Command, "--sync-fd", strconv.Itoa(inv.SyncFD)}
	if inv.Reaper() {
		a = append(a, "--status-fd", strconv.Itoa(inv.StatusFD))
	}
	return a
}

// Argv is the command line the supervisor starts the reaper with.
func Argv(syncFD, statusFD int) []string {
	return Invocation{SyncFD: syncFD, StatusFD: statusFD}.argv()
}
