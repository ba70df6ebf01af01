package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/service/launch"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve runs over a local HTTP API (docs/api.md)",
		Description: "Runs in the foreground, as root, until SIGTERM or SIGINT: then it stops accepting, lets the runs\n" +
			"in flight finish or reach their timeout, and exits 0 (a second signal kills them, status killed).\n" +
			"Every run is `nsbox run --json` with the same steps, audit row and result. On a Unix socket the\n" +
			"socket's mode (0660, group nsbox when that group exists) is the access control; on TCP every\n" +
			"request needs the bearer token of --token-file. The API is described at GET /v1/openapi.json.\n" +
			"The service is the nsbox-serve binary beside nsbox (make build puts it there; owned and writable\n" +
			"by root only, as nsbox-init): this command checks it and replaces itself with it.",
		Flags: []cli.Flag{
			onceFlag("listen", nil, "unix:"+launch.DefaultSocket, "unix:PATH, or tcp:HOST:PORT (needs --token-file)"),
			onceFlag("token-file", nil, "", "file whose first line is the bearer token (mode 0600 or stricter); required on TCP"),
			&cli.BoolFlag{Name: "listen-public", Usage: "allow a TCP address that is not loopback"},
			onceFlag("policies", nil, strings.Join(launch.DefaultPolicies(), ","),
				"policies clients may name, comma-separated: built-in names or policy file paths"),
			&cli.Int64Flag{Name: "max-body", Value: launch.DefaultMaxBody, Usage: "largest request body in bytes, files included (413 past it)"},
			&cli.IntFlag{Name: "max-concurrent-runs", Value: launch.DefaultMaxConcurrentRuns, Usage: "runs at once (429 past it)"},
			&cli.IntFlag{Name: "pool", Value: launch.DefaultPool, Usage: "sandboxes kept started ahead per policy, with the policy's preload imported, for one-shot runs (0: none)"},
			&cli.IntFlag{Name: "max-sessions", Value: launch.DefaultMaxSessions, Usage: "sessions open at once (429 past it); each holds a sandbox until closed or idle"},
			onceFlag("audit-db", nil, "", "audit log database (default $NSBOX_AUDIT_DB or "+audit.DefaultPath+")"),
		},
		Action: serveAction,
	}
}

func serveAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("nsbox serve: unexpected arguments %q", c.Args().Slice()), result.ExitSandboxError)
	}
	// The flags given, as nsbox-serve's serve command reads them; it
	// applies the same defaults (package launch) and checks the values.
	args := []string{"serve"}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		v := c.String(name)
		switch f.(type) {
		case *cli.BoolFlag:
			v = fmt.Sprint(c.Bool(name))
		case *cli.Int64Flag:
			v = fmt.Sprint(c.Int64(name))
		case *cli.IntFlag:
			v = fmt.Sprint(c.Int(name))
		}
		args = append(args, "--"+name+"="+v)
	}
	err := launch.Exec(args)
	return cli.Exit("nsbox serve: "+err.Error(), result.ExitSandboxError)
}
