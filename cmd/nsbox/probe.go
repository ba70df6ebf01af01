package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/sandbox/hostcheck"
)

// probeCommand is one `nsbox doctor` probe, for internal use only: doctor
// re-executes this binary with it inside the namespaces under test. It is
// hidden from --help, and refuses to change any namespace that is not its
// own (hostcheck.ChildMain).
func probeCommand() *cli.Command {
	return &cli.Command{
		Name:   hostcheck.ChildCommand,
		Usage:  "internal use only: one nsbox doctor probe",
		Hidden: true,
		// The probe's arguments are its own (hostcheck.ChildMain).
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			os.Exit(hostcheck.ChildMain(c.Args().Slice()))
			return nil
		},
	}
}
