package main

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The documentation checks: what the Markdown files of the repository say
// about the code must exist in it (docs/development.md lists them).

// foreignFlags are the --flags the docs name that belong to other tools,
// with the tool. Anything else spelt --flag must be an nsbox flag.
var foreignFlags = map[string]string{
	// pip and pip-compile (docs/roots.md, the lock format)
	"require-hashes": "pip", "only-binary": "pip", "no-deps": "pip", "no-compile": "pip",
	"no-input": "pip", "hash": "pip", "index-url": "pip", "global-option": "pip", "editable": "pip",
	"root": "pip", "ignore-installed": "pip",
	"dry-run": "pip", "report": "pip", "generate-hashes": "pip-compile",
	// compileall, ld.so
	"invalidation-mode": "compileall", "list": "ld.so",
	// scripts/lock-root.sh
	"upgrade": "scripts/lock-root.sh", "check": "scripts/lock-root.sh",
	// bench/bench.py and bench/pandas_import.py
	"runs": "bench", "pandas-runs": "bench", "warmups": "bench", "rss-runs": "bench", "phase-runs": "bench",
	"verify-runs": "bench", "build-runs": "bench", "only": "bench", "no-install": "bench",
	"json-out": "bench", "md-out": "bench", "render": "bench",
	// the peers the benchmark runs
	"unshare-all": "bwrap", "mount": "unshare",
	// docs/sandbox.md compares the program's PID 1 with docker run's
	"init": "docker run",
	// docs/api.md talks to the service with curl
	"unix-socket": "curl",
	// docs/kubernetes.md creates the token's Secret
	"from-file": "kubectl",
	// docs/running.md runs nsbox in a delegated cgroup; the rootless tests' account
	"user": "systemd-run", "scope": "systemd-run", "add-subuids": "usermod", "add-subgids": "usermod",
}

// cliModel is the command line as newApp builds it, hidden commands
// included: the flags of each command, by its words after "nsbox".
type cliModel struct {
	cmds map[string]*cli.Command // "run", "audit list", ...
	all  map[string]bool         // every flag name of every command, and the app's
}

func newCLIModel() *cliModel {
	app := newApp()
	m := &cliModel{cmds: map[string]*cli.Command{}, all: map[string]bool{}}
	for _, n := range []string{"help", "h", "version", "v"} {
		m.all[n] = true
	}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			m.cmds[name] = c
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					m.all[n] = true
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
	return m
}

// flagsOf are the names a command accepts, help included.
func (m *cliModel) flagsOf(cmd string) map[string]bool {
	out := map[string]bool{"help": true, "h": true}
	if cmd == "" {
		out["version"], out["v"] = true, true
		return out
	}
	for _, f := range m.cmds[cmd].Flags {
		for _, n := range f.Names() {
			out[n] = true
		}
	}
	return out
}

var bareFlagRE = regexp.MustCompile(`(?:^|[\s\[(="',/])--([a-z][a-z0-9-]*)`)

// checkBareFlags reports each --flag in text that is neither an nsbox flag
// nor one of foreignFlags.
func (m *cliModel) checkBareFlags(t *testing.T, where, text string) {
	t.Helper()
	for _, g := range bareFlagRE.FindAllStringSubmatch(text, -1) {
		if !m.all[g[1]] && foreignFlags[g[1]] == "" {
			t.Errorf("%s: --%s is no flag of any nsbox command (nor of another tool the docs name): %q", where, g[1], strings.TrimSpace(text))
		}
	}
}

// checkCode checks one line of code (a fenced line or a code span): an
// nsbox command line must name existing commands and only their flags;
// any other --flag must be an nsbox flag or a known foreign one.
func (m *cliModel) checkCode(t *testing.T, where, code string) {
	t.Helper()
	code = strings.TrimSpace(code)
	for _, c := range shellCommands(code) {
		words := shellWords(c)
		for len(words) > 0 && (words[0] == "$" || words[0] == "sudo" || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
			words = words[1:]
		}
		if len(words) == 0 || path.Base(words[0]) != "nsbox" {
			m.checkBareFlags(t, where, c)
			continue
		}
		m.checkNsbox(t, where, c, words[1:])
	}
}

// checkNsbox checks the words after "nsbox": the command words, then the
// flags of that command.
func (m *cliModel) checkNsbox(t *testing.T, where, line string, words []string) {
	t.Helper()
	cmd := ""
	i := 0
	for ; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") || !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
			break
		}
		next := strings.TrimSpace(cmd + " " + w)
		if c, ok := m.cmds[next]; ok {
			cmd = next
			if len(c.Subcommands) == 0 {
				i++
				break
			}
			continue
		}
		if cmd == "" || len(m.cmds[cmd].Subcommands) > 0 {
			t.Errorf("%s: `nsbox %s`: no such command (%q)", where, next, line)
			return
		}
		break
	}
	flags := m.flagsOf(cmd)
	for _, w := range words[i:] {
		if w == "-" || !strings.HasPrefix(w, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if name == "" || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
			continue
		}
		if !flags[name] {
			t.Errorf("%s: %s is no flag of `nsbox %s` (%q)", where, w, cmd, line)
		}
	}
}

// TestDocsFlagsAndCommands: every nsbox command and flag the docs name
// exists (docs/cli.md, generated, documents every one that does).
func TestDocsFlagsAndCommands(t *testing.T) {
	m := newCLIModel()
	for _, f := range markdownFiles(t) {
		for _, b := range f.blocks {
			// In a block with prompts only the prompted lines are
			// commands; the rest is their output.
			prompted := slices.ContainsFunc(b.lines, func(l mdText) bool { return strings.HasPrefix(strings.TrimSpace(l.text), "$ ") })
			for _, l := range b.lines {
				where := f.path + ":" + itoa(l.line)
				if prompted && !strings.HasPrefix(strings.TrimSpace(l.text), "$ ") {
					m.checkBareFlags(t, where, l.text)
					continue
				}
				m.checkCode(t, where, l.text)
			}
		}
		for _, s := range f.spans {
			m.checkCode(t, f.path+":"+itoa(s.line), s.text)
		}
		for _, p := range f.prose {
			m.checkBareFlags(t, f.path+":"+itoa(p.line), p.text)
		}
	}
}

// goTests maps each Go test, fuzz target and benchmark of the repository
// to the files that define it.
func goTests(t *testing.T) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
	out := map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[relPath(p)] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = append(out[m[1]], relPath(p))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("find the Go tests: %v", err)
	}
	return out
}

var testNameRE = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z0-9_]\w*`)

// TestDocsNameRealTests: every Go test the docs name exists, and each test
// SECURITY.md lists under a file is defined in that file.
func TestDocsNameRealTests(t *testing.T) {
	tests := goTests(t)
	for _, f := range markdownFiles(t) {
		for i, line := range f.lines {
			for _, name := range testNameRE.FindAllString(line, -1) {
				if len(tests[name]) == 0 {
					t.Errorf("%s:%d: names %s, which is no Go test, fuzz target or benchmark", f.path, i+1, name)
				}
			}
		}
	}

	b, err := os.ReadFile(filepath.Join(repoRoot, "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := parseMarkdown("SECURITY.md", string(b))
	checked := 0
	for _, row := range sec.rows {
		if len(row) < 3 {
			continue
		}
		file := ""
		for _, m := range spanRE.FindAllStringSubmatch(row[len(row)-1], -1) {
			span := m[1]
			switch {
			case strings.HasSuffix(span, "_test.go"):
				file = span
				if _, err := os.Stat(filepath.Join(repoRoot, span)); err != nil {
					t.Errorf("SECURITY.md: row %q names %s, which does not exist", row[0], span)
				}
			case testNameRE.MatchString(span):
				checked++
				if file != "" && !slices.Contains(tests[span], file) {
					t.Errorf("SECURITY.md: row %q lists %s under %s, but it is defined in %v", row[0], span, file, tests[span])
				}
			}
		}
	}
	if checked == 0 {
		t.Error("SECURITY.md names no test in its tables: the protection → test table is gone")
	}
}

// TestDocsLinks: every relative link points at a file of the repository,
// and every #anchor at a heading of the page.
func TestDocsLinks(t *testing.T) {
	files := markdownFiles(t)
	byPath := map[string]*mdFile{}
	for _, f := range files {
		byPath[f.path] = f
	}
	for _, f := range files {
		for _, l := range f.links {
			target := l.text
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := f.path
			if file != "" {
				dest = path.Join(path.Dir(f.path), file)
				if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", f.path, l.line, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			d, ok := byPath[dest]
			if !ok {
				t.Errorf("%s:%d: link to %s: an anchor into a file that is not Markdown", f.path, l.line, target)
				continue
			}
			if !d.anchors()[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading #%s", f.path, l.line, target, dest, anchor)
			}
		}
	}
}

// repoPathRE matches a code span that names a path in the repository.
var repoPathRE = regexp.MustCompile(`^(?:cmd|sandbox|policies|rootfs-builder|seccomp-profiles|internal|tests|scripts|bench|docs|examples|deploy|\.ci)/[A-Za-z0-9_./-]*$`)

// TestDocsRepoPaths: every repository path the docs name in code exists
// (a package moved or a file renamed without its docs).
func TestDocsRepoPaths(t *testing.T) {
	for _, f := range markdownFiles(t) {
		for _, s := range f.spans {
			p, _, _ := strings.Cut(s.text, ":") // sandbox/initproc/init.go:run
			if !repoPathRE.MatchString(p) || strings.HasPrefix(p, "bench/.venv-datasci") {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				t.Errorf("%s:%d: names %s, which does not exist", f.path, s.line, p)
			}
		}
	}
}

// TestDocsSpeakOfTheProduct: no reader meets tracker talk (an issue or an
// item by number), in the docs or in any source file, and measured figures
// stay in docs/benchmarks.md (and the hand-written findings it includes),
// where make bench keeps them current.
func TestDocsSpeakOfTheProduct(t *testing.T) {
	tracker := regexp.MustCompile(`(?i)\b(?:issue|item)s? #?\d+`)
	figure := regexp.MustCompile(`\b\d+\.\d+ ?(?:ms|µs|us|ns|s|MiB|KiB|GiB|MB|KB|kB|GB)\b`)
	for _, f := range markdownFiles(t) {
		measured := f.path == "docs/benchmarks.md" || f.path == "bench/findings.md"
		for i, line := range f.lines {
			if m := tracker.FindString(line); m != "" {
				t.Errorf("%s:%d: %q speaks of the tracker, not of the product", f.path, i+1, m)
			}
			if m := figure.FindString(line); m != "" && !measured {
				t.Errorf("%s:%d: measured figure %q: it belongs in docs/benchmarks.md (written by make bench); link to it", f.path, i+1, m)
			}
		}
	}
	// Every source file: code, comments, scripts, policies, the lock.
	sources := 0
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		if d.IsDir() {
			if skipDirs[filepath.ToSlash(rel)] {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".py", ".sh", ".toml", ".lock":
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sources++
		for i, line := range strings.Split(string(b), "\n") {
			if m := tracker.FindString(line); m != "" {
				t.Errorf("%s:%d: %q speaks of the tracker, not of the product", filepath.ToSlash(rel), i+1, m)
			}
		}
		return nil
	})
	if err != nil || sources == 0 {
		t.Fatalf("walk the sources: %v (%d read)", err, sources)
	}
	// Beyond Markdown: the Makefile's comments, bench.py, and the help
	// text (module docstring) of the pandas benchmark.
	for name, part := range map[string]func(string) string{
		"Makefile":               commentLines,
		"bench/bench.py":         func(s string) string { return s },
		"bench/pandas_import.py": moduleDocstring,
	} {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(part(string(b)), "\n") {
			if m := tracker.FindString(line); m != "" {
				t.Errorf("%s (line %d of what a reader meets): %q speaks of the tracker, not of the product", name, i+1, m)
			}
		}
	}
}

// commentLines keeps the lines of a Makefile that are comments.
func commentLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// moduleDocstring is a Python file's module docstring, its --help text.
func moduleDocstring(s string) string {
	_, rest, ok := strings.Cut(s, `"""`)
	if !ok {
		return ""
	}
	doc, _, _ := strings.Cut(rest, `"""`)
	return doc
}

// TestDocsSizes: the two pages every newcomer opens stay short.
func TestDocsSizes(t *testing.T) {
	for name, max := range map[string]int64{"README.md": 15 << 10, "ARCHITECTURE.md": 20 << 10} {
		fi, err := os.Stat(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > max {
			t.Errorf("%s is %d bytes, more than %d: move detail to a topic page under docs/", name, fi.Size(), max)
		}
	}
}
