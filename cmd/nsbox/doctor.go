package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/internal/userns"
	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/hostcheck"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// exitCannotEnforce is doctor's exit status when the policy's requirements
// cannot be enforced on this host.
const exitCannotEnforce = 1

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "report what this host can enforce, and how to fix what it cannot",
		Description: "Probes this host the way a run uses it: short-lived children in new user, mount, PID, network,\n" +
			"IPC, UTS and cgroup namespaces, a detached read-only mount attached in one of them, a procfs with\n" +
			"subset=pid, the cgroup controllers and their accounting of socket buffers, seccomp, the Landlock ABI,\n" +
			"what keeps a program from executing a file it makes in memory (memfd noexec) and, on cgroup v2, a\n" +
			"child cloned straight into a temporary cgroup. It reports the host id range runs take their uids\n" +
			"from (NSBOX_ID_RANGE) and whether a --workspace on the filesystem of --workspace can be idmapped.\n" +
			"Run by another user than root, it probes from nsbox's user namespace (rootless mode) and reports,\n" +
			"instead of those two, the namespace's id maps, the ids runs get, where the user's state lives and\n" +
			"Ubuntu's AppArmor switch for user namespaces (docs/running.md#rootless-mode).\n" +
			"It changes nothing on the host and removes what it creates. It prints one line per feature (ok or\n" +
			"MISSING, what was found, the first Linux version with it, the requirement it belongs to) and how\n" +
			"to fix what is missing.\n" +
			"\n" +
			"Exit status: 0 when every requirement of the policy (its sandbox.require) can be enforced here,\n" +
			"1 when one cannot (nsbox run refuses that policy on this host), 125 when doctor itself failed.\n" +
			"\n" +
			"--json prints one object: kernel (uname release); checks, a list of {name, group, ok, detail,\n" +
			"min_kernel, hint} where group is the requirement the check belongs to (\"namespaces\", \"cgroups\",\n" +
			"\"seccomp\", \"landlock\", \"memfd_noexec\", or \"\" when informational) and hint is how to fix it\n" +
			"(\"\" when ok); notes, protections that work but weaker than asked; policy; requires, the policy's\n" +
			"requirements; missing, those this host cannot enforce; ok, true when missing is empty. When\n" +
			"doctor itself fails (a bad policy, exit 125) --json still prints one object: {policy, ok: false,\n" +
			"error}.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Value: "strict",
				Usage: "built-in policy name (" + fmt.Sprint(policies.BuiltinNames()) + ") or path of a policy TOML file whose requirements are checked"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of the table"},
			&cli.StringFlag{Name: "workspace", Value: ".",
				Usage: "directory whose filesystem the idmapped-workspace check probes (one you mean to pass to nsbox run --workspace)"},
		},
		Action: doctorAction,
	}
}

// probeHost probes the host; tests replace it with a synthetic report.
var probeHost = hostcheck.Probe

func doctorAction(c *cli.Context) error {
	err := doctor(c)
	var exit cli.ExitCoder
	if err != nil && c.Bool("json") && !errors.As(err, &exit) {
		// --json promises one object on stdout, a failure included; the
		// message goes to stderr too, as without --json.
		failed := struct {
			Policy string `json:"policy"`
			OK     bool   `json:"ok"`
			Error  string `json:"error"`
		}{c.String("policy"), false, err.Error()}
		if werr := json.NewEncoder(c.App.Writer).Encode(failed); werr != nil {
			return fmt.Errorf("%w (and writing it as JSON failed: %v)", err, werr)
		}
	}
	return err
}

// doctor probes the host and prints the report; a cli.ExitCoder when the
// policy cannot be enforced (the report is printed), another error when
// doctor itself failed.
func doctor(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("doctor takes no arguments, got %q", c.Args().Slice())
	}
	pol, err := policies.Resolve(c.String("policy"))
	if err != nil {
		return err
	}
	reqs := policyRequirements(pol)
	if err := hostcheck.ValidateRequirements(reqs); err != nil {
		return fmt.Errorf("policy %s: %w", pol.Name, err)
	}
	// The probes re-execute this binary (hidden command in probe.go).
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the nsbox binary to re-execute for the probes: %w", err)
	}
	rep := probeHost(exe)
	d := diagnose(rep, pol.Name, reqs)
	d.Checks = append(append(d.Checks, initCheck(), networkCheck(rep, pol)), modeChecks(c.String("workspace"))...)
	if c.Bool("json") {
		err = d.writeJSON(c.App.Writer)
	} else {
		err = d.writeText(c.App.Writer)
	}
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if !d.OK {
		return cli.Exit("", exitCannotEnforce)
	}
	return nil
}

// initCheck says which init runs start: the stand-alone nsbox-init beside
// this binary (faster to start), or this binary again, and why.
func initCheck() hostcheck.Check {
	c := hostcheck.Check{Name: "stand-alone init", OK: true, MinKernel: "-"}
	if p := userns.PassedInit(); p != nil {
		c.Detail = p.Name() + ": checked on the host by the nsbox you started (rootless mode)"
		return c
	}
	f, err := supervisor.InitFile()
	if err != nil {
		c.Detail = "not used, runs re-execute nsbox, which starts slower: " + err.Error()
		c.Hint = "make build puts " + supervisor.InitBinary + " next to nsbox, owned by root, mode 0755"
		return c
	}
	defer f.Close()
	c.Detail = f.Name() + " (built without cgo)"
	return c
}

// idRangeCheck reports the host ids runs take their own from
// (NSBOX_ID_RANGE).
func idRangeCheck() hostcheck.Check {
	c := hostcheck.Check{Name: "host id range", MinKernel: "-"}
	r, err := supervisor.IDRangeFromEnv()
	if err != nil {
		c.Detail = err.Error()
		c.Hint = "set NSBOX_ID_RANGE=BASE:COUNT to even numbers clear of 0-65535 and systemd's container range, or unset it for " +
			supervisor.DefaultIDRange.String()
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s: uids and gids %d-%d, %d runs at once", r, r.Base, r.Base+r.Count-1, r.Slots())
	return c
}

// idmapCheck reports whether a --workspace in dir would be idmapped.
func idmapCheck(dir string) hostcheck.Check {
	c := hostcheck.Check{Name: "idmapped workspace", MinKernel: "5.12"}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	r, err := supervisor.IDRangeFromEnv()
	if err != nil {
		r = supervisor.DefaultIDRange
	}
	if err := supervisor.ProbeIdmap(dir, r); err != nil {
		c.Detail = dir + ": " + err.Error()
		c.Hint = "a --workspace there must be writable by others, and the program's files belong to the run's own uid; " +
			"use a directory on ext4, xfs, btrfs or tmpfs (Linux 6.3) for files owned by the directory's owner"
		return c
	}
	c.OK = true
	c.Detail = dir + ": can be idmapped"
	return c
}

// policyRequirements is the one place that says which host requirements a
// policy has: its sandbox.require list.
func policyRequirements(pol *policies.Policy) []string {
	return slices.Clone(pol.Sandbox.Require)
}

// diagnosis is a probe report judged against one policy; as JSON it is
// doctor's --json object.
type diagnosis struct {
	hostcheck.Report
	Policy   string   `json:"policy"`   // built-in name or file path
	Requires []string `json:"requires"` // the policy's requirements
	Missing  []string `json:"missing"`  // requirements this host cannot enforce
	OK       bool     `json:"ok"`       // Missing is empty
}

func diagnose(r hostcheck.Report, policy string, reqs []string) diagnosis {
	d := diagnosis{Report: r, Policy: policy, Requires: reqs, Missing: r.Missing(reqs)}
	// Empty lists, not null, so consumers need not special-case them.
	for _, p := range []*[]string{&d.Requires, &d.Missing, &d.Notes} {
		if *p == nil {
			*p = []string{}
		}
	}
	if d.Checks == nil {
		d.Checks = []hostcheck.Check{}
	}
	d.OK = len(d.Missing) == 0
	return d
}

func (d diagnosis) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// writeText prints the table, the notes, the fixes and the verdict.
func (d diagnosis) writeText(w io.Writer) error {
	fmt.Fprintf(w, "nsbox doctor: Linux %s\n\n", d.Kernel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tSTATUS\tDETAIL\tMIN KERNEL\tREQUIREMENT")
	for _, c := range d.Checks {
		status := "ok"
		if !c.OK {
			status = "MISSING"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, status, c.Detail, dash(c.MinKernel), dash(c.Group))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range d.Notes {
			fmt.Fprint(w, wrap("- ", n))
		}
	}
	if fixes := fixes(d.Checks); len(fixes) > 0 {
		fmt.Fprintln(w, "\nHow to fix what is missing:")
		for _, f := range fixes {
			fmt.Fprint(w, wrap("- ", f))
		}
	}
	fmt.Fprintln(w)
	_, err := fmt.Fprintln(w, d.verdict())
	return err
}

// fixes are the hints of the failed checks, each once, led by the names
// of the checks that share it.
func fixes(checks []hostcheck.Check) []string {
	var hints []string
	names := map[string][]string{}
	for _, c := range checks {
		if c.OK || c.Hint == "" {
			continue
		}
		if _, ok := names[c.Hint]; !ok {
			hints = append(hints, c.Hint)
		}
		names[c.Hint] = append(names[c.Hint], c.Name)
	}
	out := make([]string, len(hints))
	for i, h := range hints {
		out[i] = strings.Join(names[h], ", ") + ": " + h
	}
	return out
}

func (d diagnosis) verdict() string {
	switch {
	case len(d.Requires) == 0:
		return fmt.Sprintf("Policy %s requires nothing of the host (sandbox.require is empty).", d.Policy)
	case d.OK:
		return fmt.Sprintf("Policy %s: every requirement (%s) can be enforced on this host.", d.Policy, strings.Join(d.Requires, ", "))
	}
	return fmt.Sprintf("Policy %s: CANNOT be enforced on this host: missing %s (of %s); nsbox run refuses it here.",
		d.Policy, strings.Join(d.Missing, ", "), strings.Join(d.Requires, ", "))
}

// wrap formats text as a list item of lines up to about 100 columns,
// continuation lines indented under the first word.
func wrap(bullet, text string) string {
	const width = 100
	var b strings.Builder
	line := bullet
	indent := strings.Repeat(" ", len(bullet))
	for i, word := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent + word
			continue
		}
		if i > 0 {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}

// dash stands in for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
