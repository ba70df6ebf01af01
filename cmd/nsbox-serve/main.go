// Command nsbox-serve is nsbox's HTTP service (package service), and its
// MCP server over stdio (`nsbox mcp`), in a
// binary of its own: `nsbox serve` checks it (owned and writable by root
// only, beside nsbox, as nsbox-init) and replaces itself with it. Keeping
// net/http out of the nsbox binary keeps it out of every cold
// `nsbox run`: its package initialisers and size cost each start.
//
// Its command line is internal: nsbox has parsed and documented the
// flags (docs/cli.md) and passes the ones given as --name=value.
//
//	nsbox-serve serve [--listen=...] [--token-file=...] ...
//	nsbox-serve mcp [--policies=...] ...
//	nsbox-serve client --server=... --code-fd=N [--stdin-fd=N] [--json] [--policy=...] ...
//
// It also handles the init's command line, like nsbox: the supervisor
// re-executes the running binary as the sandbox init when no stand-alone
// nsbox-init lies beside it.
package main

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/sandbox/cgroup"
	"github.com/nsbox/nsbox/sandbox/initproc"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The run's own package records the version in audit rows and in the base
// root it builds.
func init() { job.Version = version }

func main() {
	userns.Continue() // a rootless re-execution waiting for its id maps
	if inv, ok := initproc.Args(os.Args); ok {
		initproc.Main(inv) // returns only via os.Exit
	}
	// Started by another user than root, the service and the MCP server
	// run in nsbox's own user namespace (internal/userns), as nsbox run
	// does; nsbox checked this binary on the host before executing it.
	if len(os.Args) >= 2 && (os.Args[1] == "serve" || os.Args[1] == "mcp") {
		if err := userns.Enter(cgroup.PrepareDelegated, supervisor.InitFile); err != nil {
			fmt.Fprintf(os.Stderr, "nsbox %s: rootless mode: %v\n", os.Args[1], err)
			os.Exit(result.ExitSandboxError)
		}
	}
	if len(os.Args) >= 2 {
		switch os.Args[1] {
		case "serve":
			os.Exit(serveMain(os.Args[2:]))
		case "client":
			os.Exit(clientMain(os.Args[2:]))
		case "mcp":
			os.Exit(mcpMain(os.Args[2:]))
		}
	}
	fmt.Fprintln(os.Stderr, "nsbox-serve: internal to nsbox (run `nsbox serve`)")
	os.Exit(result.ExitSandboxError)
}
