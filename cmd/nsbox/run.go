package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/internal/termsafe"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
	"github.com/nsbox/nsbox/service/launch"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run Python code in a fresh sandbox",
		ArgsUsage: "[FILE | -]",
		Description: "The program is FILE, standard input (-) or the -c string; its own standard input is --stdin's\n" +
			"bytes, else at EOF. Plain mode passes the program's\n" +
			"stdout and stderr through (each capped) and exits with its exit code; 124 on timeout, 125 when\n" +
			"nsbox itself failed, 126 when the policy's Python allowlist refused the program, 137 when nsbox\n" +
			"killed the run (memory or output limit, stopped by hand), 128+N when\n" +
			"the program died from signal N. --json prints one result object instead (docs/result-schema.md).\n" +
			"On a terminal, the program's control sequences are shown as text (--raw-output passes them), and\n" +
			"nsbox's own lines on stderr always start on a fresh line.\n" +
			"Flags can only lower the policy's limits, never raise them.",
		Flags: []cli.Flag{
			onceFlag("policy", []string{"p"}, "default",
				"built-in policy name ("+fmt.Sprint(policies.BuiltinNames())+") or path of a policy TOML file"),
			onceFlag("code", []string{"c"}, "", "program passed as a string"),
			onceFlag("stdin", nil, "", "`FILE` whose bytes are the program's standard input, then end of input (- for nsbox's own standard input, when the program is not read from it; at most "+policies.Size(job.MaxStdin).String()+"; default: none, at EOF)"),
			&cli.BoolFlag{Name: "json", Usage: "print one JSON result object instead of the program's output"},
			onceFlag("timeout", nil, "", "wall-clock limit, at most the policy's (e.g. 2s)"),
			onceFlag("output-limit", nil, "", "byte cap per stream, at most the policy's (e.g. 16KiB)"),
			onceFlag("network", nil, "", `"none": no network for this run, even where the policy allows hosts (nothing on the command line widens it)`),
			onceFlag("workspace", nil, "", "host directory mounted read-write at /workspace (default: a fresh empty one, removed afterwards)"),
			&cli.BoolFlag{Name: "raw-output", Usage: "pass the program's terminal control sequences (ESC, OSC, C1, bidi) to a terminal unchanged; by default they are shown as text"},
			&cli.BoolFlag{Name: "trace-phases", Usage: "record how long each phase of the run took (result field phases; on stderr in plain mode)"},
			&cli.StringSliceFlag{Name: "label", Usage: "key=value recorded with the run in the audit log (repeatable)"},
			onceFlag("audit-db", nil, "", "audit log database (default $NSBOX_AUDIT_DB or "+audit.DefaultPath+")"),
			&cli.StringFlag{Name: "server", EnvVars: []string{"NSBOX_SERVER"},
				Usage: "send the run to an nsbox serve at unix:PATH or tcp:HOST:PORT (or $NSBOX_SERVER); same output and exit code (no --workspace, --trace-phases or --audit-db)"},
			&cli.StringFlag{Name: "token-file", EnvVars: []string{"NSBOX_TOKEN_FILE"},
				Usage: "with --server on TCP: file whose first line is the service's bearer token (or $NSBOX_TOKEN_FILE)"},
		},
		Action: runAction,
		// A caller that asked for JSON gets one result object even when
		// the command line itself is wrong.
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			if !slices.Contains(os.Args, "--json") {
				return err
			}
			r := result.New(supervisor.NewID(), "")
			r.Status = result.StatusSandboxError
			r.Error = result.StepError("input", err)
			if werr := r.WriteJSON(os.Stdout); werr != nil {
				return cli.Exit(fmt.Sprintf("nsbox: write result: %v", werr), result.ExitSandboxError)
			}
			return cli.Exit("", result.ExitSandboxError)
		},
	}
}

func runAction(c *cli.Context) error {
	if c.String("server") != "" {
		return runRemote(c)
	}
	jsonOut := c.Bool("json")
	tr := newTrace(c.Bool("trace-phases"))
	ctx, stop := stopOnSignals()
	defer stop()
	std := termsafe.NewStdio(c.Bool("raw-output"))
	req := job.Request{
		PolicyName: c.String("policy"),
		Workspace:  c.String("workspace"),
		AuditDB:    c.String("audit-db"),
		Log:        std.Own,
		Trace:      tr,
		// The program, bounded by the plan: no bigger than
		// limits.program_size, and from standard input within the run's
		// timeout.
		ReadCode: func(size int64, wait time.Duration) ([]byte, error) {
			return readCode(c, programLimits{size: size, wait: wait})
		},
	}
	if c.IsSet("stdin") {
		req.ReadStdin = func(size int64, wait time.Duration) ([]byte, error) {
			return readInput(c.String("stdin"), programLimits{size: size, wait: wait})
		}
	}
	req.InputError = checkStdinFlag(c)
	if req.InputError == nil {
		req.Flags, req.InputError = planFlags(c)
	}
	if req.InputError == nil {
		req.Labels, req.InputError = job.ParseLabels(c.StringSlice("label"))
	}
	if !jsonOut {
		req.Stdout, req.Stderr = std.Out, std.Err
	}
	out := job.Run(ctx, req)
	std.End()
	r := out.Result
	if jsonOut {
		if werr := r.WriteJSON(os.Stdout); werr != nil {
			return cli.Exit(fmt.Sprintf("nsbox: write result: %v", werr), result.ExitSandboxError)
		}
	} else if r.Status == result.StatusSandboxError {
		fmt.Fprintf(std.Own, "nsbox: %s\n", r.Error.Error())
		printPhases(std.Own, r)
	} else if r.Status != result.StatusOK && r.Status != result.StatusError {
		fmt.Fprintf(std.Own, "nsbox: %s: %s\n", r.Status, r.Reason)
	}
	if !jsonOut && r.Status != result.StatusSandboxError {
		printPhases(std.Own, r)
	}
	code := r.ProcessExitCode()
	if out.LostOutput != nil && r.Status != result.StatusKilled {
		// The program ended before the loss could stop it: its status
		// stands, but the caller did not get its output.
		fmt.Fprintf(std.Own, "nsbox: %v\n", out.LostOutput)
		if code == 0 {
			code = result.ExitSandboxError
		}
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// checkStdinFlag refuses --stdin - for a program read from standard input
// itself: one stream cannot be both.
func checkStdinFlag(c *cli.Context) error {
	if c.IsSet("stdin") && c.String("stdin") == "-" && c.Args().First() == "-" && !c.IsSet("code") {
		return result.StepError("input", errors.New("--stdin -: the program is read from standard input (FILE -), which cannot also be its input; give the program as FILE or with -c, or its input as --stdin FILE"))
	}
	return nil
}

// printPhases writes --trace-phases' figures to w (stderr) in plain mode,
// as one line.
func printPhases(w io.Writer, r *result.Result) {
	if len(r.Phases) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("nsbox: phases (ms):")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, " %s=%.2f", p.Name, p.MS)
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// stopOnSignals returns the run's context: SIGINT, SIGTERM, SIGHUP and
// SIGQUIT stop the run (status killed) instead of killing nsbox, so the
// sandbox is torn down and the result still reported. Called first,
// before any other goroutine runs: the runtime starts its signal-handling
// thread here, which is quick only while a processor is free.
func stopOnSignals() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	// A closed stdout or stderr must not kill nsbox mid-run (the row
	// unfinished, the sandbox left to the next run's sweep): with SIGPIPE
	// caught, a write to a closed pipe returns EPIPE, and the supervisor
	// stops the run. Caught, not ignored: an ignored signal would stay
	// ignored in the sandbox across execve.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	go func() {
		if s, ok := <-sigs; ok {
			cancel(fmt.Errorf("stopped by %s", signalName(s)))
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}

// planFlags reads the flags that narrow the policy: --timeout and
// --output-limit, each positive and at most the policy's, and --network
// none.
func planFlags(c *cli.Context) (planner.Flags, error) {
	var f planner.Flags
	if c.IsSet("timeout") {
		d, err := time.ParseDuration(c.String("timeout"))
		if err != nil {
			return f, result.StepError("input", fmt.Errorf("--timeout %q: not a duration (e.g. 2s, 1m30s, 500ms)", c.String("timeout")))
		}
		if d <= 0 {
			return f, result.StepError("input", fmt.Errorf("--timeout %s: must be positive", d))
		}
		f.Timeout = d
	}
	if c.IsSet("output-limit") {
		n, err := parseSize(c.String("output-limit"))
		if err != nil {
			return f, result.StepError("input", err)
		}
		f.OutputLimit = n
	}
	if c.IsSet("network") {
		if v := c.String("network"); v != policies.NetworkNone {
			return f, result.StepError("input", fmt.Errorf("--network %q: only %q turns the policy's network off for this run; nothing widens it (the hosts a run reaches are the policy's network.allow)", v, policies.NetworkNone))
		}
		f.NoNetwork = true
	}
	return f, nil
}

// parseSize reads --output-limit: a size with a unit ("16KiB") or a plain
// number of bytes. Zero or less is refused rather than read as "not given".
func parseSize(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		var s policies.Size
		if uerr := s.UnmarshalText([]byte(v)); uerr != nil {
			return 0, fmt.Errorf("--output-limit %q: %w", v, uerr)
		}
		n = int64(s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("--output-limit %q: must be positive", v)
	}
	return n, nil
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}

// memfdWith returns a memfd named name holding data, at offset 0, to be
// inherited by the client across execve.
func memfdWith(name string, data []byte) (int, error) {
	fd, err := unix.MemfdCreate(name, 0)
	if err != nil {
		return -1, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	// The raw descriptor, not an *os.File: a File's finalizer would close
	// it before the execve should the garbage collector run first.
	for b := data; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("write memfd %s: %w", name, err)
		}
		b = b[n:]
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return -1, fmt.Errorf("seek memfd %s: %w", name, err)
	}
	return fd, nil
}

// runRemote is nsbox run --server: the flags and the program are read
// here, as for a local run, and handed to nsbox-serve's client (beside
// nsbox, trusted as for nsbox serve), which replaces this process: the
// HTTP client stays out of nsbox. The program goes over a memfd, so its
// size is not bounded by the command line's.
func runRemote(c *cli.Context) error {
	fail := func(err error) error {
		return cli.Exit("nsbox: --server: "+err.Error(), result.ExitSandboxError)
	}
	for _, f := range []string{"workspace", "trace-phases", "audit-db"} {
		if c.IsSet(f) {
			return fail(fmt.Errorf("--%s is for a local run (the service has its own workspace and audit log)", f))
		}
	}
	args := []string{"client", "--server=" + c.String("server"), "--policy=" + c.String("policy")}
	if c.String("token-file") != "" {
		args = append(args, "--token-file="+c.String("token-file"))
	}
	if c.Bool("json") {
		args = append(args, "--json")
	}
	if c.Bool("raw-output") {
		args = append(args, "--raw-output")
	}
	flags, err := planFlags(c)
	if err != nil {
		return fail(err)
	}
	if flags.Timeout > 0 {
		args = append(args, fmt.Sprintf("--timeout=%g", flags.Timeout.Seconds()))
	}
	if flags.OutputLimit > 0 {
		args = append(args, fmt.Sprintf("--output-limit=%d", flags.OutputLimit))
	}
	if flags.NoNetwork {
		args = append(args, "--network="+policies.NetworkNone)
	}
	if err := checkStdinFlag(c); err != nil {
		return fail(err)
	}
	if _, err := job.ParseLabels(c.StringSlice("label")); err != nil {
		return fail(err)
	}
	for _, l := range c.StringSlice("label") {
		args = append(args, "--label="+l)
	}
	// The largest program any policy accepts; the service applies the
	// policy's own limits.program_size.
	wait := flags.Timeout
	if wait == 0 {
		wait = time.Minute
	}
	code, err := readCode(c, programLimits{size: 64 << 20, wait: wait})
	if err != nil {
		return fail(err)
	}
	fd, err := memfdWith("nsbox-program", code)
	if err != nil {
		return fail(err)
	}
	args = append(args, "--code-fd="+strconv.Itoa(fd))
	if c.IsSet("stdin") {
		// The program's input, bounded as for a local run, over a
		// memfd of its own.
		stdin, err := readInput(c.String("stdin"), programLimits{size: job.MaxStdin, wait: wait})
		if err != nil {
			return fail(err)
		}
		sfd, err := memfdWith("nsbox-stdin", stdin)
		if err != nil {
			return fail(err)
		}
		args = append(args, "--stdin-fd="+strconv.Itoa(sfd))
	}
	return fail(launch.Exec(args))
}
