// Command gen compiles the built-in seccomp profiles to classic BPF for the
// architecture it runs on and writes the goldens that the nsbox binary
// embeds, beside the profiles:
//
//	NAME.GOARCH.bpf   one built-in filter (a profile, or one of its
//	                  variants: NAME+loopback, NAME+proxy): the struct
//	                  sock_filter array, native endian, as seccomp(2)
//	                  takes it
//	golden_GOARCH.go  the table that embeds them, with the SHA-256 of the
//	                  NAME.json each one was compiled from
//	golden_other.go   the empty table, for the architectures without goldens
//
// Run it with `go generate ./seccomp-profiles` (or `make generate`) after
// changing a profile, the compiler in sandbox/seccomp or libseccomp, and
// commit the result. It compiles with sandbox/seccomp's Load and Compile,
// that is with libseccomp, exactly as a run compiles a user's profile.
// Files for other architectures are left alone: their goldens are made on
// those machines.
//
// TestGoldens regenerates every file in memory and fails when a checked-in
// one differs, so a stale golden cannot pass the test suite.
//
// gen is built from the package it writes into: if a golden_GOARCH.go no
// longer compiles (a botched merge), restore it with git first.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/sandbox/seccomp"
)

func main() {
	dir := flag.String("dir", ".", "the seccomp-profiles directory to write the goldens into")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "seccomp-profiles/gen: %v\n", err)
		os.Exit(1)
	}
}

// run writes what generate says and removes this architecture's goldens
// of profiles that no longer exist.
func run(dir string) error {
	files, stale, err := generate(dir)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return fmt.Errorf("write golden %s: %w", path, err)
		}
	}
	for _, name := range stale {
		path := filepath.Join(dir, name)
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove stale golden %s: %w", path, err)
		}
	}
	return nil
}

// generate returns the goldens for this architecture, by file name, and
// the golden files in dir that belong to this architecture but not to the
// current set of profiles (stale). It writes nothing.
func generate(dir string) (files map[string][]byte, stale []string, err error) {
	arch := runtime.GOARCH
	files = map[string][]byte{}
	var table bytes.Buffer
	var embeds []string
	// Every built-in filter: each profile and each of its variants.
	for _, name := range seccomp.Builtins() {
		p, err := seccomp.Load(name)
		if err != nil {
			return nil, nil, err
		}
		prog, err := p.Compile()
		if err != nil {
			return nil, nil, err
		}
		file := name + "." + arch + ".bpf"
		files[file] = prog.Raw
		embeds = append(embeds, file)
		fmt.Fprintf(&table, "\t%q: {file: %q, arch: %q, profileSHA256: %q},\n", name, file, prog.Arch, prog.SHA256)
	}

	src := fmt.Sprintf(`%s

package seccompprofiles

import "embed"

// goldenFiles holds the built-in profiles compiled for %s.
//
//go:embed %s
var goldenFiles embed.FS

// goldens describes each file of goldenFiles, by filter name (a profile,
// or one of its variants).
var goldens = map[string]golden{
%s}
`, header, arch, strings.Join(embeds, " "), table.String())
	if files["golden_"+arch+".go"], err = format.Source([]byte(src)); err != nil {
		return nil, nil, fmt.Errorf("format golden_%s.go: %w", arch, err)
	}

	// The fallback table is for every architecture that has no table of
	// its own: the ones already in dir, and this one.
	archs := []string{arch}
	tables, err := filepath.Glob(filepath.Join(dir, "golden_*.go"))
	if err != nil {
		return nil, nil, fmt.Errorf("list goldens in %s: %w", dir, err)
	}
	for _, t := range tables {
		a := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(t), "golden_"), ".go")
		if a != "other" && !strings.HasSuffix(a, "_test") && !slices.Contains(archs, a) {
			archs = append(archs, a)
		}
	}
	slices.Sort(archs)
	var not []string
	for _, a := range archs {
		not = append(not, "!"+a)
	}
	other := fmt.Sprintf(`%s

//go:build %s

package seccompprofiles

import "embed"

// goldenFiles is empty: no golden was generated on this architecture.
var goldenFiles embed.FS

// goldens is empty: see goldenFiles.
var goldens map[string]golden
`, header, strings.Join(not, " && "))
	if files["golden_other.go"], err = format.Source([]byte(other)); err != nil {
		return nil, nil, fmt.Errorf("format golden_other.go: %w", err)
	}

	old, err := filepath.Glob(filepath.Join(dir, "*."+arch+".bpf"))
	if err != nil {
		return nil, nil, fmt.Errorf("list goldens in %s: %w", dir, err)
	}
	for _, path := range old {
		if _, ok := files[filepath.Base(path)]; !ok {
			stale = append(stale, filepath.Base(path))
		}
	}
	return files, stale, nil
}

// header marks the generated Go files, in the form `go vet` and editors
// recognise.
const header = "// Code generated by seccomp-profiles/gen (go generate ./seccomp-profiles); DO NOT EDIT."

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
