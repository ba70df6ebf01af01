package build

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Requirement is one entry of a lock: an exact version and its hashes.
type Requirement struct {
	Name    string   // as written in the lock, e.g. "NumPy"
	Version string   // the exact version after "=="
	Hashes  []string // "sha256:<64 hex digits>", at least one
	Line    int      // line of the lock where the entry starts
}

// String is the pin, "name==version".
func (r Requirement) String() string { return r.Name + "==" + r.Version }

// LockError is a refused lock entry. Error() is "FILE:LINE: PACKAGE:
// REASON"; PACKAGE is the package name, or the option or text at fault
// when there is no name.
type LockError struct {
	File    string
	Line    int // 0 when the error is about the whole file
	Package string
	Reason  string
}

func (e *LockError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Package, e.Reason)
}

// lazyRegexp compiles expr on first use. The package's regexps serve
// only "nsbox rootfs build" and lock checks, but the package is linked
// into every start of the binary, where compiling them at package init
// would cost every run.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

var (
	// nameRe is a PEP 508 distribution name.
	nameRe = lazyRegexp(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	// leadingNameRe finds the name at the start of a requirement that is
	// refused, to name it in the error.
	leadingNameRe = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9._-]*`)
	// versionRe is a PEP 440 version (public and local parts) without
	// wildcards; pip checks the rest.
	versionRe = lazyRegexp(`^[A-Za-z0-9](?:[A-Za-z0-9.+!_-]*[A-Za-z0-9])?$`)
	hashRe    = lazyRegexp(`^sha256:[0-9a-f]{64}$`)
	// commentRe is pip's: a '#' at the start or after whitespace.
	commentRe = lazyRegexp(`(^|\s)#.*$`)
	// normRe is PEP 503 name normalisation.
	normRe = lazyRegexp(`[-_.]+`)
)

// CheckLock reads a lock: a pip requirements file in which every entry is
// "name==version" followed by one or more "--hash=sha256:<hex>" options
// (the output of `pip-compile --generate-hashes`, without markers). It
// refuses, naming the file, the line and the package:
//   - an entry not pinned to one exact version with "==" ("numpy>=1",
//     "numpy", "numpy==1.*", "numpy===1.0");
//   - an entry without a hash, or a hash that is not sha256 with 64 lower
//     case hex digits;
//   - any option other than --hash, on its own line (-e, -r, -c,
//     --index-url, ...) or after an entry;
//   - URLs, paths and editables, extras and environment markers;
//   - a package listed twice, and a lock with no entry.
//
// Line continuations ("\" at the end of a line) and comments are read as
// pip reads them. The entries are returned sorted by normalised name.
func CheckLock(path string) ([]Requirement, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read lock: %w", err)
	}
	return parseLock(path, data)
}

func parseLock(file string, data []byte) ([]Requirement, error) {
	var reqs []Requirement
	seen := map[string]int{} // normalised name -> line
	for line, text := range logicalLines(data) {
		text = strings.TrimSpace(commentRe().ReplaceAllString(text, ""))
		if text == "" {
			continue
		}
		r, err := parseEntry(text)
		if err != nil {
			err.File, err.Line = file, line
			return nil, err
		}
		r.Line = line
		key := normalize(r.Name)
		if prev, ok := seen[key]; ok {
			return nil, &LockError{file, line, r.Name, fmt.Sprintf("listed twice (also on line %d)", prev)}
		}
		seen[key] = line
		reqs = append(reqs, r)
	}
	if len(reqs) == 0 {
		return nil, &LockError{File: file, Reason: "no packages (omit the lock for a root with the standard library only)"}
	}
	slices.SortFunc(reqs, func(a, b Requirement) int { return strings.Compare(normalize(a.Name), normalize(b.Name)) })
	return reqs, nil
}

// logicalLines yields each logical line with the number of its first
// physical line, joining lines that end with a backslash (but not comment
// lines, as pip does not).
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

// parseEntry reads one logical line: a pinned requirement and its hashes.
func parseEntry(text string) (Requirement, *LockError) {
	fields := strings.Fields(text)
	if strings.HasPrefix(fields[0], "-") {
		return Requirement{}, optionLine(fields)
	}
	// The requirement is everything before the first option, as pip
	// splits it ("numpy == 1.0" is one requirement).
	i := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, "-") })
	if i < 0 {
		i = len(fields)
	}
	spec, opts := strings.Join(fields[:i], " "), fields[i:]
	r, lerr := parsePin(spec)
	if lerr != nil {
		return r, lerr
	}
	for j := 0; j < len(opts); j++ {
		opt, val, hasVal := strings.Cut(opts[j], "=")
		if opt != "--hash" {
			return r, &LockError{Package: r.Name, Reason: fmt.Sprintf("option %s is not allowed in a lock (only --hash=sha256:...)", opts[j])}
		}
		if !hasVal { // "--hash sha256:..."
			if j+1 == len(opts) {
				return r, &LockError{Package: r.Name, Reason: "--hash without a value"}
			}
			j++
			val = opts[j]
		}
		if !hashRe().MatchString(val) {
			return r, &LockError{Package: r.Name, Reason: fmt.Sprintf("bad hash %q: want sha256:<64 lower case hex digits>", val)}
		}
		r.Hashes = append(r.Hashes, val)
	}
	if len(r.Hashes) == 0 {
		return r, &LockError{Package: r.Name, Reason: "no hash: every package needs --hash=sha256:<digest of its wheel> (pip --require-hashes)"}
	}
	return r, nil
}

// optionLine explains why a line that starts with an option is refused.
func optionLine(fields []string) *LockError {
	opt, _, hasVal := strings.Cut(fields[0], "=")
	arg := fields[0] // the option with its value, to name it
	if !hasVal && len(fields) > 1 {
		arg += " " + fields[1]
	}
	switch opt {
	case "-e", "--editable":
		return &LockError{Package: arg, Reason: "editable requirements are not allowed in a lock"}
	case "-r", "--requirement", "-c", "--constraint":
		return &LockError{Package: arg, Reason: "a lock cannot include other files"}
	case "--hash":
		return &LockError{Package: fields[0], Reason: "--hash must follow its package on the same logical line (end the previous line with \\)"}
	}
	return &LockError{Package: fields[0], Reason: "options are not allowed in a lock, only name==version --hash=sha256:... entries (configure the index with pip's own configuration)"}
}

// parsePin reads "name==version" (spaces around "==" allowed).
func parsePin(spec string) (Requirement, *LockError) {
	name := leadingNameRe().FindString(spec)
	if name == "" {
		name = spec
	}
	refuse := func(why string) (Requirement, *LockError) {
		return Requirement{Name: name}, &LockError{Package: name, Reason: why}
	}
	switch {
	case strings.Contains(spec, "://") || strings.Contains(spec, "@"):
		return refuse(fmt.Sprintf("URL requirement %q is not allowed: pin name==version from the index", spec))
	case strings.ContainsAny(spec, `/\`) || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "~") ||
		strings.HasSuffix(spec, ".whl") || strings.HasSuffix(spec, ".zip") || strings.HasSuffix(spec, ".tar.gz"):
		return refuse(fmt.Sprintf("path requirement %q is not allowed: pin name==version from the index", spec))
	case strings.Contains(spec, ";"):
		return refuse("environment markers are not allowed: a lock lists exactly what is installed")
	case strings.Contains(spec, "["):
		return refuse("extras are not allowed: list every package the extra brings with its own pin")
	case strings.Contains(spec, "==="):
		return refuse(fmt.Sprintf("%q uses arbitrary equality (===); pin with ==", spec))
	}
	n, v, ok := strings.Cut(spec, "==")
	n, v = strings.TrimSpace(n), strings.TrimSpace(v)
	switch {
	case !ok || strings.ContainsAny(n+v, "<>=!~,"):
		return refuse(fmt.Sprintf("%q is not pinned: use name==version", spec))
	case strings.Contains(v, "*"):
		return refuse(fmt.Sprintf("%q is a wildcard, not one version: use name==version", spec))
	case !nameRe().MatchString(n):
		return refuse(fmt.Sprintf("%q is not a valid package name", n))
	case !versionRe().MatchString(v):
		return refuse(fmt.Sprintf("%q is not a valid version", v))
	}
	return Requirement{Name: n, Version: v}, nil
}

// normalize is the PEP 503 form of a package name: "Foo_Bar" -> "foo-bar".
func normalize(name string) string {
	return normRe().ReplaceAllString(strings.ToLower(name), "-")
}

// pipLock renders reqs as the requirements file pip is given: exactly the
// entries CheckLock accepted, so pip reads nothing this package did not.
func pipLock(reqs []Requirement) []byte {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.String())
		for _, h := range r.Hashes {
			b.WriteString(" --hash=" + h)
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
