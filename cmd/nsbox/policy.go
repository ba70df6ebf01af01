package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/policies"
)

// exitPolicyInvalid is the exit status of nsbox policy show when the
// policy cannot be read or is invalid.
const exitPolicyInvalid = 1

func policyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "list the built-in policies and show what a policy gives a run",
		Description: "A policy is a TOML file or a built-in name, as `nsbox run --policy` takes it. docs/policies.md\n" +
			"documents every key and how extends resolves.",
		HideHelpCommand: true,
		Subcommands:     []*cli.Command{policyListCommand(), policyShowCommand()},
	}
}

func policyListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the built-in policies with their descriptions",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("policy list takes no arguments, got %q", c.Args().Slice())
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			for _, name := range policies.BuiltinNames() {
				p, err := policies.Builtin(name)
				if err != nil {
					return cli.Exit(fmt.Sprintf("nsbox policy list: %v", err), exitPolicyInvalid)
				}
				fmt.Fprintf(tw, "%s\t%s\n", name, p.Description)
			}
			return tw.Flush()
		},
	}
}

func policyShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a policy: as written, or resolved with every key",
		ArgsUsage: "NAME|FILE",
		Description: "Without flags, prints the policy's text as written (a built-in's embedded source). --resolved\n" +
			"prints what a run gets: every key after extends and list additions and removals, in the\n" +
			"reference's order, as a policy file that --policy accepts back. --json prints the resolved\n" +
			"policy as one JSON object with its name and sha256. The policy is validated either way.\n" +
			"--packages prints, instead, the top-level modules the policy's root installs besides the standard\n" +
			"library: those the import allowlist allows and those it does not (as JSON with --json). It reads\n" +
			"the root's manifest, so the root must be built.\n" +
			"Exit status: 0 shown, 1 the policy cannot be read or is invalid (FILE:LINE: KEY: MESSAGE).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "resolved", Usage: "print every key after extends, as TOML"},
			&cli.BoolFlag{Name: "json", Usage: "print the resolved policy as JSON"},
			&cli.BoolFlag{Name: "packages", Usage: "list the root's installed packages the policy allows, and those it does not"},
		},
		Action: policyShowAction,
	}
}

func policyShowAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("policy show takes one policy name or file, got %q", c.Args().Slice())
	}
	arg := c.Args().First()
	fail := func(err error) error { return cli.Exit(fmt.Sprintf("nsbox policy show: %v", err), exitPolicyInvalid) }
	p, err := policies.Resolve(arg)
	if err != nil {
		return fail(err)
	}
	w := c.App.Writer
	switch {
	case c.Bool("packages"):
		rp, err := readRootPackages(p)
		if err != nil {
			return fail(err)
		}
		return rp.write(w, c.Bool("json"))
	case c.Bool("json"):
		_, err = w.Write(p.JSON())
	case c.Bool("resolved"):
		_, err = fmt.Fprintf(w, "# Policy %q resolved by nsbox policy show: every key, as a run gets it.\n"+
			"# sha256 of the policy as given: %s\n", p.Name, p.SHA256)
		if err == nil {
			_, err = w.Write(p.TOML())
		}
	default:
		var text []byte
		if _, text, err = policies.Source(arg); err != nil {
			return fail(err)
		}
		_, err = w.Write(text)
	}
	return err
}
