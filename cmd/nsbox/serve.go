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
			"by root only, as nsbox-init): this command checks it and replaces itself with it. It also serves\n" +
			"the MCP tools at /mcp (streamable HTTP; docs/mcp.md), behind the same access control.",
		Flags: append([]cli.Flag{
			onceFlag("listen", nil, "unix:"+launch.DefaultSocket, "unix:PATH, or tcp:HOST:PORT (needs --token-file)"),
			onceFlag("token-file", nil, "", "file whose first line is the bearer token (mode 0600 or stricter); required on TCP"),
			&cli.BoolFlag{Name: "listen-public", Usage: "allow a TCP address that is not loopback"},
		}, serviceFlags(launch.DefaultPool)...),
		Action: func(c *cli.Context) error { return execService(c, "serve") },
	}
}

// serviceFlags are the flags nsbox serve and nsbox mcp share, each also
// a key of --config's file.
func serviceFlags(pool int) []cli.Flag {
	return []cli.Flag{
		onceFlag("config", nil, "", "TOML file of settings: these flags' names as keys (max-sessions = 4, policies = [\"default\"]); flags given override it (docs/mcp.md)"),
		onceFlag("policies", nil, strings.Join(launch.DefaultPolicies(), ","),
			"policies clients may name, comma-separated: built-in names or policy file paths"),
		&cli.Int64Flag{Name: "max-body", Value: launch.DefaultMaxBody, Usage: "largest request body in bytes, files included (413 past it)"},
		&cli.IntFlag{Name: "max-concurrent-runs", Value: launch.DefaultMaxConcurrentRuns, Usage: "runs at once (429 past it)"},
		&cli.IntFlag{Name: "pool", Value: pool, Usage: "sandboxes kept started ahead per policy, with the policy's preload imported, for one-shot runs (0: none)"},
		&cli.IntFlag{Name: "max-sessions", Value: launch.DefaultMaxSessions, Usage: "sessions open at once (429 past it); each holds a sandbox until closed or idle"},
		onceFlag("audit-db", nil, "", "audit log database (default $NSBOX_AUDIT_DB or "+audit.DefaultPath+")"),
	}
}

// execService replaces nsbox with nsbox-serve's command cmd ("serve" or
// "mcp"), given the flags set.
func execService(c *cli.Context, cmd string) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("nsbox %s: unexpected arguments %q", cmd, c.Args().Slice()), result.ExitSandboxError)
	}
	// The flags given, as nsbox-serve's command reads them; it applies
	// the same defaults (package launch), reads --config, and checks the
	// values.
	args := []string{cmd}
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
	return cli.Exit("nsbox "+cmd+": "+err.Error(), result.ExitSandboxError)
}

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the Model Context Protocol over stdio: Python tools for a model (docs/mcp.md)",
		Description: "An MCP server on stdin and stdout for an MCP client (an agent, a desktop app) that starts it:\n" +
			"tools run_python (a fresh sandbox per call), create_session, run_cell, upload_file,\n" +
			"download_file, list_files and close_session, with the same policies, limits, pools and audit\n" +
			"rows as nsbox serve. Runs as root. When the client closes stdin, every session it left open is\n" +
			"closed and nsbox exits 0. Logs go to stderr. Like nsbox serve, it is the nsbox-serve binary\n" +
			"beside nsbox, which this command checks and replaces itself with.",
		Flags:  serviceFlags(launch.DefaultMCPPool),
		Action: func(c *cli.Context) error { return execService(c, "mcp") },
	}
}
