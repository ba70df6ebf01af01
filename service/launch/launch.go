// Package launch is the part of nsbox serve the nsbox binary links: the
// service's defaults and the hand-over to the service binary. The service
// itself (package service, net/http and its dependencies) lives in
// nsbox-serve (cmd/nsbox-serve), so a cold `nsbox run` does not load it:
// the HTTP stack's package initialisers and size would be paid by every
// run. This package must not import net/http (a test checks the nsbox
// binary's dependencies).
package launch

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// Binary is the file name of the service binary; make build puts it next
// to nsbox.
const Binary = "nsbox-serve"

// Defaults of the service's limits (documented in docs/api.md and the
// flags' help).
const (
	DefaultSocket            = "/run/nsbox/nsbox.sock"
	DefaultMaxBody           = 32 << 20 // bytes of one request body, files included (base64)
	DefaultMaxConcurrentRuns = 8        // runs at once; past it, 429
	DefaultPool              = 2        // sandboxes started ahead per policy, for one-shot runs
	DefaultMCPPool           = 1        // the same for nsbox mcp: one client, one call at a time
	DefaultMaxSessions       = 32       // sessions open at once; past it, 429
)

// Exec replaces the running process with the service binary beside it,
// given args after its own name (for example "serve", "--listen=..."). The
// binary must pass supervisor.OpenBeside's checks (a regular file owned by
// root, written by root only, in a directory only root writes to): nsbox
// runs as root and hands it the caller's request. Exec returns only on
// failure, with an error naming the path.
func Exec(args []string) error {
	f, err := supervisor.OpenBeside(Binary)
	if err != nil {
		return fmt.Errorf("the service binary (make build puts %s beside nsbox): %w", Binary, err)
	}
	// The checked file is the one executed: through its descriptor, not
	// its path, which could be replaced between the check and the exec.
	// The descriptor is close-on-exec; the kernel has loaded the ELF file
	// by then.
	argv := append([]string{f.Name()}, args...)
	err = syscall.Exec("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), argv, os.Environ())
	f.Close()
	return fmt.Errorf("exec %s: %w", f.Name(), err)
}

// DefaultPolicies are the policies served unless --policies says
// otherwise: the built-ins except permissive, which turns the sandbox's
// protections off and is for trying nsbox by hand.
func DefaultPolicies() []string {
	var out []string
	for _, n := range policies.BuiltinNames() {
		if n != "permissive" {
			out = append(out, n)
		}
	}
	return out
}
