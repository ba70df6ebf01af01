package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/service"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve runs over a local HTTP API (docs/api.md)",
		Description: "Runs in the foreground, as root, until SIGTERM or SIGINT: then it stops accepting, lets the runs\n" +
			"in flight finish or reach their timeout, and exits 0 (a second signal kills them, status killed).\n" +
			"Every run is `nsbox run --json` with the same steps, audit row and result. On a Unix socket the\n" +
			"socket's mode (0660, group nsbox when that group exists) is the access control; on TCP every\n" +
			"request needs the bearer token of --token-file. The API is described at GET /v1/openapi.json.",
		Flags: []cli.Flag{
			onceFlag("listen", nil, "unix:"+service.DefaultSocket, "unix:PATH, or tcp:HOST:PORT (needs --token-file)"),
			onceFlag("token-file", nil, "", "file whose first line is the bearer token (mode 0600 or stricter); required on TCP"),
			&cli.BoolFlag{Name: "listen-public", Usage: "allow a TCP address that is not loopback"},
			onceFlag("policies", nil, strings.Join(defaultServedPolicies(), ","),
				"policies clients may name, comma-separated: built-in names or policy file paths"),
			&cli.Int64Flag{Name: "max-body", Value: service.DefaultMaxBody, Usage: "largest request body in bytes, files included (413 past it)"},
			&cli.IntFlag{Name: "max-concurrent-runs", Value: service.DefaultMaxConcurrentRuns, Usage: "runs at once (429 past it)"},
			onceFlag("audit-db", nil, "", "audit log database (default $NSBOX_AUDIT_DB or "+audit.DefaultPath+")"),
		},
		Action: serveAction,
	}
}

// defaultServedPolicies are the built-ins except permissive, which turns
// the sandbox's protections off and is for trying nsbox by hand.
func defaultServedPolicies() []string {
	var out []string
	for _, n := range policies.BuiltinNames() {
		if n != "permissive" {
			out = append(out, n)
		}
	}
	return out
}

func serveAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("nsbox serve: unexpected arguments %q", c.Args().Slice()), result.ExitSandboxError)
	}
	// Signals first, before other goroutines start (as for run).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	cfg, addr, err := serveConfig(c)
	if err != nil {
		return cli.Exit("nsbox serve: "+err.Error(), result.ExitSandboxError)
	}
	srv, err := service.New(cfg)
	if err != nil {
		return cli.Exit("nsbox serve: "+err.Error(), result.ExitSandboxError)
	}
	ln, err := service.Listen(addr)
	if err != nil {
		return cli.Exit("nsbox serve: "+err.Error(), result.ExitSandboxError)
	}
	fmt.Fprintf(os.Stderr, "nsbox serve: listening on %s (policies %s)\n", addr, c.String("policies"))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return cli.Exit(fmt.Sprintf("nsbox serve: %v", err), result.ExitSandboxError)
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "nsbox serve: %s: draining (a second signal kills the runs in flight)\n", signalName(s))
	}
	drained := make(chan error, 1)
	go func() { drained <- srv.Shutdown(context.Background()) }()
	select {
	case err = <-drained:
	case s := <-sigs:
		srv.Stop(fmt.Errorf("the service was stopped by a second %s", signalName(s)))
		err = <-drained
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("nsbox serve: drain: %v", err), result.ExitSandboxError)
	}
	if err := <-served; err != nil {
		return cli.Exit(fmt.Sprintf("nsbox serve: %v", err), result.ExitSandboxError)
	}
	fmt.Fprintln(os.Stderr, "nsbox serve: drained, exiting")
	return nil
}

// serveConfig reads the flags: the address, the token on TCP, and the
// policies, each resolved now so a bad one stops the service at start.
func serveConfig(c *cli.Context) (service.Config, service.Address, error) {
	cfg := service.Config{
		MaxBody: c.Int64("max-body"), MaxConcurrentRuns: c.Int("max-concurrent-runs"),
		AuditDB: c.String("audit-db"), Log: os.Stderr, Version: version,
		Policies: map[string]*policies.Policy{},
	}
	if cfg.MaxBody <= 0 || cfg.MaxConcurrentRuns <= 0 {
		return cfg, service.Address{}, errors.New("--max-body and --max-concurrent-runs must be positive")
	}
	if os.Geteuid() != 0 {
		return cfg, service.Address{}, errors.New("must run as root, as nsbox run does")
	}
	addr, err := service.ParseAddress(c.String("listen"))
	if err != nil {
		return cfg, addr, err
	}
	switch {
	case addr.Network == "tcp" && !c.IsSet("token-file"):
		return cfg, addr, fmt.Errorf("--listen %s: TCP needs --token-file (anyone who can connect could run code)", addr)
	case addr.Network == "tcp" && !addr.Loopback() && !c.Bool("listen-public"):
		return cfg, addr, fmt.Errorf("--listen %s: not a loopback address; add --listen-public to serve other hosts", addr)
	case addr.Network == "unix" && c.IsSet("token-file"):
		return cfg, addr, errors.New("--token-file is for TCP; on a Unix socket the socket's mode is the access control")
	}
	if c.IsSet("token-file") {
		if cfg.Token, err = service.ReadToken(c.String("token-file")); err != nil {
			return cfg, addr, err
		}
	}
	for _, name := range strings.Split(c.String("policies"), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		pol, err := policies.Resolve(name)
		if err != nil {
			return cfg, addr, fmt.Errorf("--policies: %w", err)
		}
		cfg.Policies[name] = pol
	}
	if len(cfg.Policies) == 0 {
		return cfg, addr, errors.New("--policies: no policy given")
	}
	return cfg, addr, nil
}
