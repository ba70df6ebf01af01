package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/service"
	"github.com/nsbox/nsbox/service/launch"
)

// serveFlags are nsbox serve's flags (cmd/nsbox/serve.go documents them),
// with the same defaults; nsbox mcp's are those but the listener's.
type serveFlags struct {
	listen, tokenFile, policies, auditDB string
	listenPublic                         bool
	maxBody                              int64
	maxConcurrentRuns, maxSessions, pool int
	set                                  map[string]bool
}

// parseServeFlags reads the flags of cmd ("serve" or "mcp"), then the
// settings of --config the command line left unset.
func parseServeFlags(cmd string, args []string) (serveFlags, error) {
	var f serveFlags
	var config string
	fs := flag.NewFlagSet("nsbox "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pool := launch.DefaultPool
	if cmd == "serve" {
		fs.StringVar(&f.listen, "listen", "unix:"+launch.DefaultSocket, "")
		fs.StringVar(&f.tokenFile, "token-file", "", "")
		fs.BoolVar(&f.listenPublic, "listen-public", false, "")
	} else {
		pool = launch.DefaultMCPPool
	}
	fs.StringVar(&config, "config", "", "")
	fs.StringVar(&f.policies, "policies", strings.Join(launch.DefaultPolicies(), ","), "")
	fs.Int64Var(&f.maxBody, "max-body", launch.DefaultMaxBody, "")
	fs.IntVar(&f.maxConcurrentRuns, "max-concurrent-runs", launch.DefaultMaxConcurrentRuns, "")
	fs.IntVar(&f.pool, "pool", pool, "")
	fs.IntVar(&f.maxSessions, "max-sessions", launch.DefaultMaxSessions, "")
	fs.StringVar(&f.auditDB, "audit-db", "", "")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if config != "" {
		var skip []string
		if cmd == "mcp" {
			skip = serveOnly
		}
		if err := applyConfig(fs, config, f.set, skip); err != nil {
			return f, err
		}
		fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	}
	return f, nil
}

// serveMain serves until SIGTERM or SIGINT, then drains; it returns the
// exit code.
func serveMain(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "nsbox serve: "+format+"\n", a...)
		return result.ExitSandboxError
	}
	// Signals first, before other goroutines start (as for run).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	// A log whose reader went away (the SDK's private service, whose
	// process was killed, logs to a pipe from it) must not kill the
	// service mid-drain: without this, Go dies of SIGPIPE on the first
	// write to stderr, leaving its socket and its sandboxes to the next
	// start. The write fails instead, and the drain goes on.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	fl, err := parseServeFlags("serve", args)
	if err != nil {
		return fail("%v", err)
	}
	cfg, addr, err := serveConfig(fl)
	if err != nil {
		return fail("%v", err)
	}
	srv, err := service.New(cfg)
	if err != nil {
		return fail("%v", err)
	}
	ln, err := service.Listen(addr)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "nsbox serve: listening on %s (policies %s)\n", addr, fl.policies)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fail("%v", err)
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
		return fail("drain: %v", err)
	}
	if err := <-served; err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(os.Stderr, "nsbox serve: drained, exiting")
	return 0
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// serveConfig checks the flags: the address, the token on TCP, and the
// policies, each resolved now so a bad one stops the service at start.
func serveConfig(fl serveFlags) (service.Config, service.Address, error) {
	cfg, err := serviceConfig(fl)
	if err != nil {
		return cfg, service.Address{}, err
	}
	addr, err := service.ParseAddress(fl.listen)
	if err != nil {
		return cfg, addr, err
	}
	hasToken := fl.set["token-file"]
	switch {
	case addr.Network == "tcp" && !hasToken:
		return cfg, addr, fmt.Errorf("--listen %s: TCP needs --token-file (anyone who can connect could run code)", addr)
	case addr.Network == "tcp" && !addr.Loopback() && !fl.listenPublic:
		return cfg, addr, fmt.Errorf("--listen %s: not a loopback address; add --listen-public to serve other hosts", addr)
	case addr.Network == "unix" && hasToken:
		return cfg, addr, errors.New("--token-file is for TCP; on a Unix socket the socket's mode is the access control")
	}
	if hasToken {
		if cfg.Token, err = service.ReadToken(fl.tokenFile); err != nil {
			return cfg, addr, err
		}
	}
	return cfg, addr, nil
}

// serviceConfig checks what nsbox serve and nsbox mcp share: the limits,
// the pool, root, and the policies, each resolved now so a bad one stops
// the service at start.
func serviceConfig(fl serveFlags) (service.Config, error) {
	cfg := service.Config{
		MaxBody: fl.maxBody, MaxConcurrentRuns: fl.maxConcurrentRuns, MaxSessions: fl.maxSessions,
		AuditDB: fl.auditDB, Log: os.Stderr, Version: version,
		Policies: map[string]*policies.Policy{},
	}
	if cfg.MaxBody <= 0 || cfg.MaxConcurrentRuns <= 0 || cfg.MaxSessions <= 0 {
		return cfg, errors.New("--max-body, --max-concurrent-runs and --max-sessions must be positive")
	}
	if fl.pool < 0 || fl.pool > service.MaxPool {
		return cfg, fmt.Errorf("--pool %d: from 0 (none) to %d sandboxes per policy", fl.pool, service.MaxPool)
	}
	cfg.Pool = fl.pool
	if os.Geteuid() != 0 {
		return cfg, errors.New("must run as root, as nsbox run does")
	}
	for _, name := range strings.Split(fl.policies, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		pol, err := policies.Resolve(name)
		if err != nil {
			return cfg, fmt.Errorf("--policies: %w", err)
		}
		cfg.Policies[name] = pol
	}
	if len(cfg.Policies) == 0 {
		return cfg, errors.New("--policies: no policy given")
	}
	return cfg, nil
}
