package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/planner"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// Exit codes of nsbox check.
const (
	checkClean      = 0
	checkViolations = 1
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check a program against a policy's Python allowlist without running it",
		ArgsUsage: "[FILE | -]",
		Description: "Runs only the static check of the policy's Python layer (imports, denied builtins and, under\n" +
			"strict, underscore attributes) in a sandbox, with the policy's interpreter, and prints every\n" +
			"violation as FILE:LINE:COL: KIND NAME: DETAIL. The program never runs.\n" +
			"Exit status: 0 clean, 1 violations or a syntax error, 125 when nsbox itself failed.\n" +
			"--json prints {\"file\", \"policy\", \"ok\", \"violations\": [{kind, name, line, col, detail}],\n" +
			"\"syntax_error\"} instead.",
		Flags: []cli.Flag{
			onceFlag("policy", []string{"p"}, "default",
				"built-in policy name ("+fmt.Sprint(policies.BuiltinNames())+") or path of a policy TOML file"),
			onceFlag("code", []string{"c"}, "", "program passed as a string"),
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of text"},
		},
		Action: checkAction,
	}
}

// checkReport is nsbox check's --json object.
type checkReport struct {
	File        string             `json:"file"`
	Policy      string             `json:"policy"`
	OK          bool               `json:"ok"`
	Violations  []result.Violation `json:"violations"`
	SyntaxError string             `json:"syntax_error,omitempty"`
}

func checkAction(c *cli.Context) error {
	pol, err := policies.Resolve(c.String("policy"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("nsbox check: policy: %v", err), result.ExitSandboxError)
	}
	code, err := readCode(c, programLimits{size: int64(pol.Limits.ProgramSize), wait: pol.Limits.Timeout.Duration})
	if err != nil {
		return cli.Exit(fmt.Sprintf("nsbox check: %v", err), result.ExitSandboxError)
	}
	file := pyrunner.DefaultFilename
	if c.NArg() == 1 && c.Args().First() != "-" {
		file = c.Args().First()
	}
	r, err := check(pol, code, file)
	if err != nil {
		return cli.Exit(fmt.Sprintf("nsbox check: %v", err), result.ExitSandboxError)
	}
	if r.Status == result.StatusSandboxError {
		return cli.Exit(fmt.Sprintf("nsbox check: %s", r.Error.Error()), result.ExitSandboxError)
	}
	rep := checkReport{File: file, Policy: pol.Name, Violations: r.Violations}
	if rep.Violations == nil {
		rep.Violations = []result.Violation{}
	}
	switch r.Status {
	case result.StatusOK:
		rep.OK = true
	case result.StatusPolicyViolation:
	default:
		// The runner exits 1 on a syntax error and prints Python's message.
		rep.SyntaxError = string(r.StderrBytes())
	}
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return cli.Exit(fmt.Sprintf("nsbox check: write: %v", err), result.ExitSandboxError)
		}
	} else {
		printCheck(os.Stdout, rep)
	}
	if !rep.OK {
		return cli.Exit("", checkViolations)
	}
	return nil
}

// check runs the runner's static check of code under pol in a sandbox,
// the same plan a run would get but in check mode.
func check(pol *policies.Policy, code []byte, file string) (*result.Result, error) {
	pl, err := planner.Make(pol, planner.Flags{CheckOnly: true, Filename: file}, plan.ReadHost(pol.Sandbox.Require))
	if err != nil {
		return nil, err
	}
	if err := job.EnsureBase(context.Background(), pl.Root.Name, os.Stderr); err != nil {
		return nil, result.StepError("rootfs", err)
	}
	out := supervisor.Run(context.Background(), supervisor.Options{Plan: pl, StateDir: supervisor.StateDir()}, code)
	return out.Result, nil
}

// printCheck writes the human form: one line per violation, like a
// compiler's, or the syntax error, or "ok".
func printCheck(w io.Writer, rep checkReport) {
	switch {
	case rep.SyntaxError != "":
		fmt.Fprint(w, rep.SyntaxError)
	case rep.OK:
		fmt.Fprintf(w, "%s: ok under policy %s\n", rep.File, rep.Policy)
	default:
		for _, v := range rep.Violations {
			fmt.Fprintf(w, "%s:%d:%d: %s %s: %s\n", rep.File, v.Line, v.Col, v.Kind, v.Name, v.Detail)
		}
		fmt.Fprintf(w, "%s: %d violation(s) under policy %s\n", rep.File, len(rep.Violations), rep.Policy)
	}
}
