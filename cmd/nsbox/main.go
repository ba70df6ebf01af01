// Command nsbox runs untrusted Python in a fresh Linux sandbox (user,
// mount, PID, network, IPC, UTS and cgroup namespaces, a read-only root,
// no network) and reports what happened as a structured result.
//
// One file per command: run.go (nsbox run), serve.go, check.go, doctor.go,
// rootfs.go, audit.go, and init.go and probe.go (the hidden commands the
// supervisor and doctor re-execute this binary with). docs/cli.md is
// generated from newApp (docs_test.go).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

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
	// The init's exact command line skips the cli App: it need not build
	// every command and flag to parse one.
	if inv, ok := initproc.Args(os.Args); ok {
		initproc.Main(inv) // returns only via os.Exit
	}
	// Started by another user than root, the commands that build
	// sandboxes or roots continue in nsbox's own user namespace
	// (internal/userns); the others need nothing of it.
	if needsUserns(os.Args) {
		// A delegated cgroup's leaf is entered first, so that the
		// namespace's nsbox is born there (sandbox/cgroup).
		if err := userns.Enter(cgroup.PrepareDelegated, supervisor.InitFile); err != nil {
			if os.Args[1] != "doctor" {
				fmt.Fprintf(os.Stderr, "nsbox: rootless mode: %v\n", err)
				os.Exit(result.ExitSandboxError)
			}
			os.Setenv(envUsernsError, err.Error()) // doctor reports it
		}
	}
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// newApp builds the command line: every command, its flags and their help.
// The CLI reference, docs/cli.md, is generated from it.
func newApp() *cli.App {
	return &cli.App{
		Name:    "nsbox",
		Usage:   "run untrusted Python in a Linux namespace sandbox",
		Version: version,
		Description: "nsbox runs Python code produced by AI agents in a fresh sandbox: new user, mount, PID,\n" +
			"network, IPC, UTS and cgroup namespaces, a read-only root with only /workspace and /tmp writable,\n" +
			"an unprivileged uid, no network, a wall-clock timeout that kills every process of the run and\n" +
			"capped output. See docs/policies.md for the policy format and docs/result-schema.md for --json.",
		Commands: []*cli.Command{
			runCommand(),
			checkCommand(),
			doctorCommand(),
			rootfsCommand(),
			initCommand(),
			probeCommand(),
			auditCommand(),
			policyCommand(),
			serveCommand(),
			mcpCommand(),
		},
		HideHelpCommand: true,
	}
}

// exitCode returns the exit code carried by err (cli.ExitCoder), else 125:
// nsbox's own failure.
func exitCode(err error) int {
	if ec, ok := err.(cli.ExitCoder); ok {
		return ec.ExitCode()
	}
	return 125
}

// needsUserns reports whether the command line's command runs in nsbox's
// user namespace when started without root: run (not --server, which
// only talks to a service), check and doctor (so that they judge the host
// a run would get) and rootfs. serve and mcp enter it in nsbox-serve, after nsbox has
// checked that binary on the host.
func needsUserns(args []string) bool {
	if len(args) < 2 {
		return false
	}
	switch args[1] {
	case "run":
		for _, a := range args[2:] {
			if a == "--" {
				break
			}
			if a == "--server" || strings.HasPrefix(a, "--server=") {
				return false
			}
		}
		return true
	case "check", "doctor", "rootfs":
		return true
	}
	return false
}
