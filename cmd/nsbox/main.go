// Command nsbox runs untrusted Python in a fresh Linux sandbox (user,
// mount, PID, network, IPC, UTS and cgroup namespaces, a read-only root,
// no network) and reports what happened as a structured result.
//
// One file per command: run.go (nsbox run), init.go (the hidden init the
// supervisor re-executes inside the sandbox).
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/sandbox/initproc"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if fd, ok := initArgs(os.Args); ok {
		initproc.Main(fd) // returns only via os.Exit
	}
	app := &cli.App{
		Name:    "nsbox",
		Usage:   "run untrusted Python in a Linux namespace sandbox",
		Version: version,
		Description: "nsbox runs Python code produced by AI agents in a fresh sandbox: new user, mount, PID,\n" +
			"network, IPC, UTS and cgroup namespaces, a read-only root with only /workspace and /tmp writable,\n" +
			"an unprivileged uid, no network, a wall-clock timeout that kills every process of the run and\n" +
			"capped output. See README.md for the policy format and docs/result-schema.md for --json.",
		Commands: []*cli.Command{
			runCommand(),
			checkCommand(),
			doctorCommand(),
			rootfsCommand(),
			initCommand(),
			probeCommand(),
			auditCommand(),
		},
		HideHelpCommand: true,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: %v\n", err)
		os.Exit(exitCode(err))
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

// initArgs recognises the exact command line the supervisor starts the
// sandbox init with, "nsbox init --sync-fd N" (supervisor/spawn.go), and
// returns N. The init starts once per sandboxed run; building the whole
// cli App (every command and flag) to parse one flag cost it ~0.1 ms of
// CPU. Any other form, including a non-canonical N ("010" is 8 to the
// flag package) or a missing or negative one, is left to the cli App and
// initCommand (init.go), which behave as before.
func initArgs(args []string) (int, bool) {
	if len(args) != 4 || args[1] != supervisor.InitCommand || args[2] != "--sync-fd" {
		return 0, false
	}
	fd, err := strconv.Atoi(args[3])
	if err != nil || fd < 0 || strconv.Itoa(fd) != args[3] {
		return 0, false
	}
	return fd, true
}
