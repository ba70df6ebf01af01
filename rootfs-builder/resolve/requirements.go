package resolve

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/nsbox/nsbox/rootfs-builder/build"
)

// Requirement is one entry of the requirements list, as written.
type Requirement struct {
	Name string // the distribution name at the start of the entry
	Text string // the whole entry, comments and continuations removed
	Line int    // line of the file where the entry starts
}

var (
	// commentRe is pip's: a '#' at the start or after whitespace.
	commentRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|\s)#.*$`) })
	// leadingNameRe finds the name at the start of an entry, to name it in
	// an error.
	leadingNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*`) })
	// entryRe is a PEP 508 requirement by name: NAME, optional [extras],
	// optional version specifiers, optional "; marker". uv checks the
	// details; this catches what is not a requirement at all, to name its
	// line.
	entryRe = sync.OnceValue(func() *regexp.Regexp {
		const (
			name  = `[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`
			extra = `\s*\[\s*(?:` + name + `(?:\s*,\s*` + name + `)*)?\s*\]`
			op    = `(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+`
			specs = `\s*\(?\s*` + op + `(?:\s*,\s*` + op + `)*\s*\)?`
		)
		return regexp.MustCompile(`^(` + name + `)(?:` + extra + `)?(?:` + specs + `)?\s*(?:;.*)?$`)
	})
)

// ReadRequirements reads a plain requirements list: one requirement by
// name per line ("pandas", "seaborn>=0.13", "pandas[excel]",
// `tomli; python_version < "3.11"`), comments and blank lines, "\" line
// continuations. It refuses, naming the file, the line and the entry,
// anything that is not a requirement by name: options (-e, -r, -c,
// --index-url, --hash, ...), URLs ("name @ https://..."), paths and
// archives, and a list with no entry.
func ReadRequirements(path string) ([]Requirement, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read requirements: %w", err)
	}
	return parseRequirements(path, data)
}

func parseRequirements(file string, data []byte) ([]Requirement, error) {
	var reqs []Requirement
	for line, text := range logicalLines(data) {
		text = strings.TrimSpace(commentRe().ReplaceAllString(text, ""))
		if text == "" {
			continue
		}
		r, err := parseRequirement(text)
		if err != nil {
			err.File, err.Line = file, line
			return nil, err
		}
		r.Line = line
		reqs = append(reqs, r)
	}
	if len(reqs) == 0 {
		return nil, &build.LockError{File: file, Reason: "no requirements: list one package per line (\"pandas\", \"seaborn>=0.13\")"}
	}
	return reqs, nil
}

// parseRequirement checks one entry.
func parseRequirement(text string) (Requirement, *build.LockError) {
	name := leadingNameRe().FindString(text)
	what := name
	if what == "" {
		what = strings.Fields(text)[0]
	}
	refuse := func(format string, args ...any) (Requirement, *build.LockError) {
		return Requirement{}, &build.LockError{Package: what, Reason: fmt.Sprintf(format, args...)}
	}
	fields := strings.Fields(text)
	switch opt, _, _ := strings.Cut(fields[0], "="); {
	case opt == "-e" || opt == "--editable":
		return refuse("editable requirements are not supported: list the package by name, from the index")
	case opt == "-r" || opt == "--requirement" || opt == "-c" || opt == "--constraint":
		return refuse("other files cannot be included: list their packages here")
	case strings.HasPrefix(opt, "-"):
		return refuse("options are not supported in a requirements list (pass --find-links or --no-index to `nsbox rootfs lock`, or set uv's index with UV_DEFAULT_INDEX)")
	case strings.Contains(text, "://") || strings.Contains(strings.Split(text, ";")[0], "@"):
		return refuse("URL requirement %q is not supported: name the package, from the index", text)
	case strings.ContainsAny(strings.Split(text, ";")[0], `/\`) || strings.HasPrefix(text, ".") || strings.HasPrefix(text, "~") ||
		strings.HasSuffix(fields[0], ".whl") || strings.HasSuffix(fields[0], ".zip") || strings.HasSuffix(fields[0], ".tar.gz"):
		return refuse("path requirement %q is not supported: name the package, from the index", text)
	case slicesContainsOption(fields):
		return refuse("options are not supported after a requirement (%q): hashes are what the lock adds", text)
	case !entryRe().MatchString(text):
		return refuse("%q is not a requirement: want NAME[EXTRAS] [VERSION SPECIFIERS] [; MARKER], e.g. \"seaborn>=0.13\"", text)
	}
	return Requirement{Name: name, Text: text}, nil
}

// slicesContainsOption reports whether a field after the first is an
// option ("pandas --hash=...").
func slicesContainsOption(fields []string) bool {
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "--") {
			return true
		}
	}
	return false
}

// logicalLines yields each logical line with the number of its first
// physical line, joining lines that end with a backslash (but not comment
// lines), as pip reads a requirements file.
func logicalLines(data []byte) func(yield func(int, string) bool) {
	return func(yield func(int, string) bool) {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		var acc strings.Builder
		start, n := 0, 0
		for sc.Scan() {
			n++
			l := strings.TrimSuffix(sc.Text(), "\r")
			if acc.Len() == 0 {
				start = n
			}
			isComment := strings.HasPrefix(strings.TrimSpace(l), "#")
			if strings.HasSuffix(l, `\`) && !isComment {
				acc.WriteString(strings.TrimSuffix(l, `\`))
				acc.WriteByte(' ')
				continue
			}
			acc.WriteString(l)
			if !yield(start, acc.String()) {
				return
			}
			acc.Reset()
		}
		if acc.Len() > 0 {
			yield(start, acc.String())
		}
	}
}

// normalize is the PEP 503 form of a package name: "Foo_Bar" -> "foo-bar".
func normalize(name string) string {
	return normRe().ReplaceAllString(strings.ToLower(name), "-")
}

var normRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-_.]+`) })
