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

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/sandbox/initproc"
	"github.com/nsbox/nsbox/sandbox/job"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The run's own package records the version in audit rows and in the base
// root it builds.
func init() { job.Version = version }

func main() {
	// The init's exact command line skips the cli App: it need not build
	// every command and flag to parse one.
	if inv, ok := initproc.Args(os.Args); ok {
		initproc.Main(inv) // returns only via os.Exit
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
