package main

//go:generate go test -tags netgo,osusergo,sqlite_omit_load_extension,urfave_cli_no_docs -run ^TestCLIReference$ -update .

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/urfave/cli/v2"
)

// cliDoc is the CLI reference, generated from newApp.
const cliDoc = "../../docs/cli.md"

// regenerate is how to bring docs/cli.md in step with the code.
const regenerate = "go test ./cmd/nsbox -run '^TestCLIReference$' -update"

var update = flag.Bool("update", false, "rewrite docs/cli.md from the command line (newApp)")

// TestCLIReference fails when docs/cli.md is not what the command line
// (newApp) generates: a command, flag, usage text or default changed and
// the page was not regenerated. With -update it writes the page.
func TestCLIReference(t *testing.T) {
	want := cliReference(newApp())
	if *update {
		if err := os.WriteFile(cliDoc, []byte(want), 0o644); err != nil {
			t.Fatalf("write %s: %v", cliDoc, err)
		}
		return
	}
	got, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatalf("read %s: %v (generate it with: %s)", cliDoc, err, regenerate)
	}
	if string(got) != want {
		t.Errorf("docs/cli.md is stale: the command line changed. Regenerate it with:\n\t%s\nfirst difference: %s",
			regenerate, firstDiff(string(got), want))
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n\tpage: %q\n\tcode: %q", i+1, gl, wl)
		}
	}
	return "none"
}

// cliReference renders the visible commands of app as Markdown: for each,
// its usage line, description and a table of its flags with their usage
// text and defaults. Hidden commands (the init, the doctor's probe, the
// build helper) are left out.
func cliReference(app *cli.App) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# nsbox command line\n\n")
	w("<!-- Generated from cmd/nsbox (newApp) by `%s`. Do not edit. -->\n\n", regenerate)
	w("`nsbox`: %s.\n\n", app.Usage)
	w("%s\n\n", paragraphs(app.Description))
	w("`nsbox --version` prints the version. `--help` (`-h`) after any command prints its help.\n\n")
	w("| Command | What it does |\n|---|---|\n")
	walkCommands(app.Commands, nil, func(path []string, c *cli.Command) {
		w("| [`%s`](#%s) | %s |\n", commandLine(path), anchor(commandLine(path)), cell(c.Usage))
	})
	walkCommands(app.Commands, nil, func(path []string, c *cli.Command) {
		blocks := []string{
			"## `" + commandLine(path) + "`",
			upperFirst(c.Usage) + ".",
			"```\n" + usageLine(path, c) + "\n```",
		}
		if d := paragraphs(c.Description); d != "" {
			blocks = append(blocks, d)
		}
		if rows := flagRows(c.Flags); len(rows) > 0 {
			blocks = append(blocks, "| Flag | Default | Meaning |\n|---|---|---|\n"+strings.Join(rows, "\n"))
		}
		w("\n%s\n", strings.Join(blocks, "\n\n"))
	})
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// walkCommands calls fn for every visible command, depth first, in the
// order the App lists them; path is the command's words after "nsbox".
func walkCommands(cmds []*cli.Command, path []string, fn func([]string, *cli.Command)) {
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		p := append(append([]string(nil), path...), c.Name)
		fn(p, c)
		walkCommands(c.Subcommands, p, fn)
	}
}

func commandLine(path []string) string { return "nsbox " + strings.Join(path, " ") }

// usageLine is the command's synopsis: its flags, then its arguments.
func usageLine(path []string, c *cli.Command) string {
	parts := []string{commandLine(path)}
	if visible(c.Subcommands) {
		parts = append(parts, "COMMAND")
	}
	if len(c.Flags) > 0 {
		parts = append(parts, "[flags]")
	}
	if c.ArgsUsage != "" {
		parts = append(parts, c.ArgsUsage)
	}
	return strings.Join(parts, " ")
}

func visible(cmds []*cli.Command) bool {
	for _, c := range cmds {
		if !c.Hidden {
			return true
		}
	}
	return false
}

// flagRows renders one table row per flag: its names with a value
// placeholder, its default (when it has one) and its usage text.
func flagRows(flags []cli.Flag) []string {
	var rows []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		d, ok := f.(cli.DocGenerationFlag)
		if !ok {
			panic(fmt.Sprintf("bug: flag %v cannot be documented", f.Names()))
		}
		placeholder, usage := unquote(d.GetUsage())
		if placeholder == "" && d.TakesValue() {
			placeholder = valueName(f)
		}
		var names []string
		for _, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			names = append(names, "`"+dash+n+"`")
		}
		if placeholder != "" {
			names[0] = strings.TrimSuffix(names[0], "`") + " " + placeholder + "`"
		}
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			usage += " (required)"
		}
		if s, ok := f.(cli.DocGenerationSliceFlag); ok && s.IsSliceFlag() && !strings.Contains(usage, "repeatable") {
			usage += " (repeatable)"
		}
		def := "-"
		if v := defaultOf(d); v != "" {
			def = "`" + v + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", strings.Join(names, ", "), def, cell(usage)))
	}
	return rows
}

// defaultOf is the flag's default as given on the command line, or "" for
// a flag whose zero value means "not given".
func defaultOf(d cli.DocGenerationFlag) string {
	switch v := d.GetValue(); v {
	case "", "0", "0s":
		return ""
	default:
		return v
	}
}

// valueName is the placeholder of a flag that takes a value.
func valueName(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag:
		return "N"
	}
	return strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
}

// unquote takes the `placeholder` out of a usage text, as the help does.
func unquote(usage string) (placeholder, text string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + "`" + name + "`" + usage[i+1+j+1:]
}

// paragraphs turns a help text, hard-wrapped with blank lines between
// paragraphs, into Markdown paragraphs, with the characters Markdown would
// read as markup escaped outside code spans.
func paragraphs(s string) string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
		out = append(out, escape(strings.Join(strings.Fields(p), " ")))
	}
	return strings.Join(out, "\n\n")
}

// cell is one line of text fit for a table cell.
func cell(s string) string {
	return strings.ReplaceAll(escape(strings.Join(strings.Fields(s), " ")), "|", `\|`)
}

// escape backslash-escapes what Markdown would read as markup outside
// `code spans`: * and <, and _ at the start of a word.
func escape(s string) string {
	var b strings.Builder
	code, prev := false, ' '
	for _, r := range s {
		switch {
		case r == '`':
			code = !code
		case code:
		case r == '*' || r == '<':
			b.WriteByte('\\')
		case r == '_' && !unicode.IsLetter(prev) && !unicode.IsDigit(prev):
			b.WriteByte('\\')
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// anchor is GitHub's id for a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// repoRoot is the repository, from this package's directory.
var repoRoot = filepath.Join("..", "..")
