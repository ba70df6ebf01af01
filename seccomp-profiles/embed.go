// Package seccompprofiles holds the built-in seccomp profiles, default.json
// and strict.json, embedded in the nsbox binary. They are OCI runtime-spec
// `linux.seccomp` documents; README.md beside them explains what each one
// allows and denies. The package only hands out bytes: parsing, validation
// and compilation live in sandbox/seccomp.
package seccompprofiles

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// The profiles are embedded so that a built binary never reads its
// security policy from a file someone could have edited.
//
//go:embed *.json
var files embed.FS

// Read returns the bytes of the built-in profile name ("default" or
// "strict", without ".json").
func Read(name string) ([]byte, error) {
	// A name is a bare word: "../x" or "a/b" must not select another file.
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return nil, fmt.Errorf("read built-in seccomp profile %q: not a profile name (one of %s)", name, strings.Join(Names(), ", "))
	}
	b, err := files.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("read built-in seccomp profile %q (one of %s): %w", name, strings.Join(Names(), ", "), err)
	}
	return b, nil
}

// Names lists the built-in profiles, sorted.
func Names() []string {
	entries, err := fs.Glob(files, "*.json")
	if err != nil {
		// The pattern is a constant: an error here is a bug in this file.
		panic(fmt.Sprintf("seccompprofiles: bad glob: %v", err))
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e, ".json"))
	}
	sort.Strings(names)
	return names
}
