package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdFile is one Markdown file of the repository, split into what the doc
// checks look at: fenced code, inline code spans, prose, headings, links.
type mdFile struct {
	path     string     // relative to the repository root, with slashes
	blocks   []mdBlock  // fenced code blocks
	spans    []mdText   // inline code spans outside fenced code
	prose    []mdText   // lines outside fenced code, code spans blanked
	headings []string   // heading texts, in order
	links    []mdText   // link targets in prose
	lines    []string   // every line
	rows     [][]string // table rows outside fenced code: their cells, code spans kept
}

// mdText is a piece of a file with the line it starts on (1-based).
type mdText struct {
	line int
	text string
}

// mdBlock is a fenced code block: its lines, continuation lines joined.
type mdBlock struct {
	line  int // the line of the opening fence
	lines []mdText
}

var (
	spanRE    = regexp.MustCompile("`([^`]+)`")
	linkRE    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// skipDirs are not read for Markdown: build output and generated data.
var skipDirs = map[string]bool{".git": true, "bin": true, "bench/.venv-datasci": true, "bench/results": true, "tests/.venv-mcp": true, "python/.venv-build": true, "python/.venv-adapters": true, ".test-v2": true, "deploy/.venv-k8s": true, "deploy/.apparmor": true, ".venv-tools": true}

// markdownFiles reads every Markdown file of the repository.
func markdownFiles(t *testing.T) []*mdFile {
	t.Helper()
	var files []*mdFile
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := relPath(p)
		if d.IsDir() {
			if skipDirs[rel] || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, parseMarkdown(rel, string(b)))
		return nil
	})
	if err != nil {
		t.Fatalf("read the Markdown files: %v", err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	return files
}

// relPath is p relative to the repository root, with slashes.
func relPath(p string) string {
	rel, err := filepath.Rel(repoRoot, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(rel)
}

func parseMarkdown(path, text string) *mdFile {
	f := &mdFile{path: path, lines: strings.Split(text, "\n")}
	var block *mdBlock
	for i, line := range f.lines {
		n := i + 1
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if block == nil {
				block = &mdBlock{line: n}
			} else {
				f.blocks = append(f.blocks, *block)
				block = nil
			}
			continue
		}
		if block != nil {
			// A line continued with a backslash is one command.
			if k := len(block.lines); k > 0 && strings.HasSuffix(block.lines[k-1].text, `\`) {
				prev := &block.lines[k-1]
				prev.text = strings.TrimSuffix(prev.text, `\`) + " " + strings.TrimSpace(line)
				continue
			}
			block.lines = append(block.lines, mdText{n, line})
			continue
		}
		for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
			f.spans = append(f.spans, mdText{n, m[1]})
		}
		prose := spanRE.ReplaceAllString(line, "CODE")
		f.prose = append(f.prose, mdText{n, prose})
		if m := headingRE.FindStringSubmatch(line); m != nil {
			f.headings = append(f.headings, m[1])
		}
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			f.links = append(f.links, mdText{n, m[1]})
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "|") {
			f.rows = append(f.rows, splitRow(t))
		}
	}
	return f
}

// splitRow splits a table row into its cells, leaving | inside code spans
// and escaped \| alone.
func splitRow(row string) []string {
	var cells []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case c == '`':
			code = !code
		case c == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte(c)
			i++
			c = row[i]
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	cells = append(cells, strings.TrimSpace(cur.String()))
	// The leading and trailing | leave empty cells at the ends.
	if len(cells) > 0 && cells[0] == "" {
		cells = cells[1:]
	}
	if len(cells) > 0 && cells[len(cells)-1] == "" {
		cells = cells[:len(cells)-1]
	}
	return cells
}

// anchors are the ids GitHub gives the file's headings: lower case,
// punctuation dropped, spaces to hyphens, and -1, -2 ... for repeats.
func (f *mdFile) anchors() map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, h := range f.headings {
		a := slug(h)
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// shellWords splits a command line as a shell would into words: quotes
// grouped and removed, a word starting with # ending the line.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// shellCommands splits a line at the unquoted |, ;, && and || between
// commands.
func shellCommands(s string) []string {
	var out []string
	var quote rune
	start := 0
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '|' || r == ';' || r == '&':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
