package main

import (
	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/sandbox/initproc"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// initCommand is the sandbox init, for internal use only: the supervisor
// re-executes this binary with it inside the new namespaces. It is hidden
// from --help and refuses to run without its sync descriptor.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:   supervisor.InitCommand,
		Usage:  "internal use only: the sandbox init",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "sync-fd", Usage: "descriptor of the sync socket from the supervisor", Required: true},
			&cli.IntFlag{Name: "status-fd", Usage: "descriptor of the reaper's exit pipe (the reaper only)", Value: -1},
		},
		Action: func(c *cli.Context) error {
			initproc.Main(initproc.Invocation{SyncFD: c.Int("sync-fd"), StatusFD: c.Int("status-fd")}) // returns only via os.Exit
			return nil
		},
	}
}
