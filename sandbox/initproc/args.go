package initproc

import "strconv"

// Command is the argument that selects the init: the supervisor starts
// it as "<binary> init --sync-fd N", where the binary is nsbox-init or
// nsbox itself (its hidden init command).
const Command = "init"

// Args recognises the exact command line the supervisor starts the init
// with, "<binary> init --sync-fd N", and returns N. Any other form,
// including a non-canonical N ("010" is 8 to the flag package) or a
// missing or negative one, is refused (nsbox leaves it to its cli App).
func Args(args []string) (syncFD int, ok bool) {
	if len(args) != 4 || args[1] != Command || args[2] != "--sync-fd" {
		return 0, false
	}
	fd, err := strconv.Atoi(args[3])
	if err != nil || fd < 0 || strconv.Itoa(fd) != args[3] {
		return 0, false
	}
	return fd, true
}
