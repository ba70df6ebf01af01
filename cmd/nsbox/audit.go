package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/sandbox/audit"
)

// Exit statuses of the audit commands, besides 0 and 125 (nsbox failed).
const (
	exitChainBroken = 1 // audit verify: the chain is broken
	exitNoSuchRun   = 1 // audit show: no run, or more than one, has that id
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "list, show, export, summarise and verify the log of runs",
		Description: "Every nsbox run is recorded in an SQLite database: " + audit.DefaultPath + " unless the\n" +
			"environment variable " + audit.EnvPath + " names another file; --audit-db overrides both. A row is\n" +
			"written with status \"unfinished\" when a run starts and completed when it ends, so a supervisor\n" +
			"killed mid-run leaves a row that says so until a later process finds that supervisor gone (by its\n" +
			"pid, start time and boot id) and finishes the row as status killed, reason \"supervisor died\":\n" +
			"every audit command does so first, for all such rows, and every run for a few. A row whose\n" +
			"supervisor is alive is never touched. Finished rows are hash-chained: `nsbox audit verify`\n" +
			"finds the first row that was edited or removed. The file holds programs and their output; it is\n" +
			"created 0600 in a directory created 0700.\n" +
			"\n" +
			"Tables are for people; --json prints the same data for programs.",
		HideHelpCommand: true,
		Subcommands: []*cli.Command{
			auditListCommand(), auditShowCommand(), auditExportCommand(), auditStatsCommand(), auditVerifyCommand(),
		},
	}
}

// auditDBFlag and auditJSONFlag are shared by every subcommand; a flag of
// the parent command would only be read before the subcommand's name.
func auditDBFlag() cli.Flag {
	return &cli.StringFlag{Name: "audit-db", Usage: "audit database (default: $" + audit.EnvPath + ", else " + audit.DefaultPath + ")"}
}

func auditJSONFlag(what string) cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print " + what + " as JSON instead of a table"}
}

// openAudit opens the database the flags and environment name. These
// commands read it, so a missing file is an error rather than an empty log
// created at a mistyped path. Then it finishes every row whose supervisor
// died, so that what the command shows is true: a killed run is not shown
// as still running.
func openAudit(c *cli.Context) (*audit.DB, error) {
	path := audit.Path(c.String("audit-db"))
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no audit db at %s: nsbox creates it at the first run (other locations: --audit-db, $%s)",
			path, audit.EnvPath)
	} else if err != nil {
		return nil, fmt.Errorf("audit db: %w", err)
	}
	db, err := audit.Open(path)
	if err != nil {
		return nil, err
	}
	auditReap(c, db)
	return db, nil
}

// auditReapDeadline bounds the wait for a log that another process holds
// locked; the command then shows the log as it is.
const auditReapDeadline = 10 * time.Second

// auditReap finishes the orphaned rows of db for an audit command and says
// on stderr how many it finished, or why it could not: the command goes on
// either way (a reader without write access still reads the log).
func auditReap(c *cli.Context, db *audit.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), auditReapDeadline)
	defer cancel()
	n, err := db.Reap(ctx, audit.ReapLimits{})
	w := c.App.ErrWriter
	if w == nil {
		w = os.Stderr
	}
	if n > 0 {
		fmt.Fprintf(w, "nsbox: audit log: %d unfinished run(s) whose supervisor died are now finished as killed\n", n)
	}
	if err != nil {
		fmt.Fprintf(w, "nsbox: audit log: %v (rows whose supervisor died may still show as unfinished)\n", err)
	}
}

// auditNoArgs refuses arguments to a subcommand that takes none.
func auditNoArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("audit %s takes no arguments, got %q", c.Command.Name, c.Args().Slice())
	}
	return nil
}

func auditListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list runs, newest first",
		Description: "Filters combine: --since 1h --status error --label team=ml lists the failed runs of the\n" +
			"last hour labelled team=ml; --host api.example.com the runs that opened a connection to that\n" +
			"host through the network proxy, allowed or refused. --json prints a JSON array of run objects\n" +
			"(as `audit show --json`).",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "since", Usage: "only runs started within this long (e.g. 1h, 30m)"},
			&cli.StringFlag{Name: "status", Usage: "only runs with this status (ok, error, timeout, ..., unfinished)"},
			&cli.BoolFlag{Name: "violations", Usage: "only runs the Python policy layer refused something in"},
			&cli.GenericFlag{Name: "label", Value: &auditLabelsFlag{}, Usage: "only runs with this label `key=value` (repeatable; all must match)"},
			&cli.StringFlag{Name: "host", Usage: "only runs that opened a connection, allowed or refused, to host `NAME` (a name or IP; ASCII case ignored) through the network proxy"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many runs; 0 for all"},
			auditJSONFlag("the runs"),
			auditDBFlag(),
		},
		Action: auditListAction,
	}
}

func auditListAction(c *cli.Context) error {
	if err := auditNoArgs(c); err != nil {
		return err
	}
	if c.Duration("since") < 0 || c.Int("limit") < 0 {
		return errors.New("--since and --limit cannot be negative")
	}
	db, err := openAudit(c)
	if err != nil {
		return err
	}
	defer db.Close()
	runs, err := db.List(audit.Filter{
		Since:      c.Duration("since"),
		Status:     c.String("status"),
		Violations: c.Bool("violations"),
		Labels:     *c.Generic("label").(*auditLabelsFlag),
		Host:       c.String("host"),
		Limit:      c.Int("limit"),
	})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if runs == nil {
			runs = []audit.Run{}
		}
		return writeAuditJSON(c.App.Writer, runs)
	}
	if err := writeAuditRunTable(c.App.Writer, runs); err != nil {
		return fmt.Errorf("write the runs: %w", err)
	}
	// A table cut at the limit says so, so that a reader does not take it
	// for the whole log.
	if limit := c.Int("limit"); limit > 0 && len(runs) == limit {
		if _, err := fmt.Fprintf(c.App.Writer, "(the newest %d runs; --limit 0 lists all)\n", limit); err != nil {
			return fmt.Errorf("write the runs: %w", err)
		}
	}
	return nil
}

func writeAuditRunTable(w io.Writer, runs []audit.Run) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tDURATION\tPOLICY\tSTATUS\tEXIT\tVIOLATIONS\tLABELS\tREASON")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", auditCell(r.ID), r.Start.Local().Format(time.DateTime),
			auditDuration(&r), auditCell(r.Policy), auditCell(r.Status), auditExitText(&r), len(r.Violations),
			auditOr(auditLabelText(r.Labels)), auditOr(auditShorten(r.Reason, auditReasonCell)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs")
		return err
	}
	return nil
}

func auditShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one run",
		ArgsUsage: "ID",
		Description: "ID may be a unique prefix of the run's id. Exit status 1 when no run, or more than one, has it.\n" +
			"--json prints one run object: the run's fields, seq, prev_hash and hash; code and the output\n" +
			"heads as text, with a _base64 twin holding the exact bytes when they are not valid UTF-8;\n" +
			"network, null for a run without network, else the result's network section with its\n" +
			"connections.",
		Flags:  []cli.Flag{auditJSONFlag("the run"), auditDBFlag()},
		Action: auditShowAction,
	}
}

func auditShowAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("audit show takes one run id, got %q", c.Args().Slice())
	}
	db, err := openAudit(c)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := db.Get(c.Args().First())
	if errors.Is(err, audit.ErrNotFound) || errors.Is(err, audit.ErrAmbiguous) {
		return cli.Exit(fmt.Sprintf("nsbox: %v", err), exitNoSuchRun)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeAuditJSON(c.App.Writer, r)
	}
	return writeAuditRunText(c.App.Writer, r)
}

func auditExportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "print every run as JSON lines",
		Description: "One run object per line (as `audit show --json`, on one line): the finished runs in chain\n" +
			"order with seq, prev_hash and hash, then the unfinished ones. Everything the hash covers is in\n" +
			"the line, exactly, so the chain can be checked from an export (sandbox/audit's package doc).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "jsonl", Usage: "output format; only jsonl"},
			auditDBFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := auditNoArgs(c); err != nil {
				return err
			}
			if f := c.String("format"); f != "jsonl" {
				return fmt.Errorf("--format %q: only jsonl is supported", f)
			}
			db, err := openAudit(c)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Export(c.App.Writer)
		},
	}
}

func auditStatsCommand() *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "summarise the log: runs by status, most refused imports, events and network targets, slowest policies",
		Description: fmt.Sprintf("Imports, audit events and network targets (a refused host:port, a refused socket call) are\n"+
			"ranked by the number of runs that had them refused, the policies by the median duration of\n"+
			"their finished runs (nearest rank), then p95; %d of each at most. Runs finished because their\n"+
			"supervisor died count as killed (and in supervisor_died), not in the policies' durations.\n"+
			"--json prints {total, unfinished, supervisor_died, by_status, top_imports, top_events,\n"+
			"network_runs, refused_connections, top_network, slowest_policies}.", audit.TopN),
		Flags: []cli.Flag{auditJSONFlag("the summary"), auditDBFlag()},
		Action: func(c *cli.Context) error {
			if err := auditNoArgs(c); err != nil {
				return err
			}
			db, err := openAudit(c)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := db.Stats()
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeAuditJSON(c.App.Writer, s)
			}
			return writeAuditStatsText(c.App.Writer, s)
		},
	}
}

func auditVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "check the hash chain of the log",
		Description: "Recomputes the hash of every finished row in chain order. Exit status 0 when the chain is\n" +
			"intact, 1 when it is broken: the first broken row is named (seq and run id) with the reason.\n" +
			"It prints the head of the chain (seq and hash): keep it elsewhere, since someone who can write\n" +
			"the database can also remove the newest rows or rewrite every hash after an edit.\n" +
			"--json prints {ok, rows, head_seq, head_hash, break: null or {seq, id, reason}}.",
		Flags:  []cli.Flag{auditJSONFlag("the outcome"), auditDBFlag()},
		Action: auditVerifyAction,
	}
}

func auditVerifyAction(c *cli.Context) error {
	if err := auditNoArgs(c); err != nil {
		return err
	}
	db, err := openAudit(c)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := db.VerifyChain()
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		err = writeAuditJSON(w, struct {
			OK bool `json:"ok"`
			*audit.Verification
		}{v.Break == nil, v})
	} else if v.Break == nil {
		_, err = fmt.Fprintf(w, "audit chain intact: %d finished runs; head seq %d hash %s\n", v.Rows, v.HeadSeq, v.HeadHash)
	} else {
		_, err = fmt.Fprintf(w, "audit chain BROKEN at seq %d (run %s): %s\n%d rows before it verify; their head is seq %d hash %s\n",
			v.Break.Seq, auditCell(v.Break.ID), auditCell(v.Break.Reason), v.Rows, v.HeadSeq, v.HeadHash)
	}
	if err != nil {
		return fmt.Errorf("write the outcome: %w", err)
	}
	if v.Break != nil {
		return cli.Exit("", exitChainBroken)
	}
	return nil
}

// auditLabelsFlag collects repeated --label key=value flags. It is a Generic
// flag rather than a StringSlice, which would split values at commas.
type auditLabelsFlag map[string]string

func (l *auditLabelsFlag) Set(s string) error {
	k, v, err := audit.ParseLabel(s)
	if err != nil {
		return err
	}
	if *l == nil {
		*l = auditLabelsFlag{}
	}
	(*l)[k] = v
	return nil
}

func (l *auditLabelsFlag) String() string {
	if l == nil {
		return ""
	}
	return auditLabelText(*l)
}
