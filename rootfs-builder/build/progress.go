package build

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
)

// Reporter receives a build's progress, from the goroutine that runs
// Build.
type Reporter interface {
	// Step announces the start of a step ("copy standard library").
	Step(name string)
	// Files reports the regular files in the root so far, after a step.
	Files(n int, bytes int64)
	// Done reports the finished root, once it is in place.
	Done(r Result)
}

// Result is a finished build.
type Result struct {
	Manifest   *rootfs.Manifest
	Generation string   // the new generation's directory, which the root's path names
	Kept       []string // older generations kept: runs still use them
}

// NewQuietReporter reports nothing.
func NewQuietReporter() Reporter { return quiet{} }

type quiet struct{}

func (quiet) Step(string)      {}
func (quiet) Files(int, int64) {}
func (quiet) Done(Result)      {}

// Summary is the final object of the JSON reporter.
type Summary struct {
	Done          bool     `json:"done"` // always true
	Python        string   `json:"python"`
	PythonVersion string   `json:"python_version"`
	Files         int      `json:"files"` // regular files
	Bytes         int64    `json:"bytes"` // their total size
	Packages      []string `json:"packages"`
	Generation    string   `json:"generation"` // the directory the root's path now names
	Kept          []string `json:"kept"`       // older generations kept for runs that use them
	ElapsedMS     int64    `json:"elapsed_ms"`
}

// summarize counts the regular files of m.
func summarize(r Result, start time.Time) Summary {
	m := r.Manifest
	s := Summary{Done: true, Python: m.Python.Path, PythonVersion: m.Python.Version, Packages: []string{},
		Generation: r.Generation, Kept: r.Kept, ElapsedMS: time.Since(start).Milliseconds()}
	if s.Kept == nil {
		s.Kept = []string{}
	}
	for _, f := range m.Files {
		if f.Type == rootfs.TypeFile {
			s.Files++
			s.Bytes += f.Size
		}
	}
	if m.Lock != nil {
		s.Packages = m.Lock.Packages
	}
	return s
}

// NewJSONReporter writes one JSON object per line to w:
//
//	{"step":"copy standard library"}
//	{"files":1456,"bytes":25270104}
//	{"done":true,"python":"/venv/bin/python","python_version":"3.11.2","files":1490,"bytes":...,"packages":[],
//	 "generation":"/var/lib/nsbox/roots/base.gen-20260101T120000Z-3fa9c2","kept":[],"elapsed_ms":2400}
func NewJSONReporter(w io.Writer) Reporter {
	return &jsonReporter{enc: json.NewEncoder(w), start: time.Now()}
}

type jsonReporter struct {
	enc   *json.Encoder
	start time.Time
}

// Write errors are ignored: progress must not fail a build.
func (j *jsonReporter) Step(name string) { _ = j.enc.Encode(map[string]string{"step": name}) }
func (j *jsonReporter) Files(n int, bytes int64) {
	_ = j.enc.Encode(struct {
		Files int   `json:"files"`
		Bytes int64 `json:"bytes"`
	}{n, bytes})
}
func (j *jsonReporter) Done(r Result) { _ = j.enc.Encode(summarize(r, j.start)) }

// NewTTYReporter writes one line per step for a person at a terminal:
//
//	copy standard library ............   0.6s   1456 files   24.1 MiB
func NewTTYReporter(w io.Writer) Reporter {
	return &ttyReporter{w: w, start: time.Now()}
}

type ttyReporter struct {
	w         io.Writer
	start     time.Time
	step      string
	stepStart time.Time
	files     int
	bytes     int64
	counted   bool // Files was called during the current step
}

func (t *ttyReporter) Step(name string) {
	t.endStep()
	t.step, t.stepStart, t.counted = name, time.Now(), false
	fmt.Fprintf(t.w, "%-36s", name+" ")
}

func (t *ttyReporter) Files(n int, bytes int64) {
	t.files, t.bytes, t.counted = n, bytes, true
}

func (t *ttyReporter) Done(r Result) {
	t.endStep()
	s := summarize(r, t.start)
	pkgs := "standard library only"
	if len(s.Packages) > 0 {
		pkgs = fmt.Sprintf("%d packages", len(s.Packages))
	}
	fmt.Fprintf(t.w, "done in %.1fs: %s (Python %s), %s, %d files, %s\n",
		time.Since(t.start).Seconds(), s.Python, s.PythonVersion, pkgs, s.Files, mib(s.Bytes))
	for _, k := range s.Kept {
		fmt.Fprintf(t.w, "kept %s: runs may still use it; a later build or `nsbox rootfs sweep` removes it\n", k)
	}
}

// endStep finishes the current step's line with its time and counts.
func (t *ttyReporter) endStep() {
	if t.step == "" {
		return
	}
	fmt.Fprintf(t.w, "%6.1fs", time.Since(t.stepStart).Seconds())
	if t.counted {
		fmt.Fprintf(t.w, "  %6d files  %10s", t.files, mib(t.bytes))
	}
	fmt.Fprintln(t.w)
	t.step = ""
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
