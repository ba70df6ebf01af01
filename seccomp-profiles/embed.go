// Package seccompprofiles holds the built-in seccomp profiles, default.json
// and strict.json, embedded in the nsbox binary, and the same profiles
// compiled to classic BPF at build time.
//
// The profiles are OCI runtime-spec `linux.seccomp` documents; README.md
// beside them explains what each one allows and denies. The compiled
// filters (the goldens: NAME.GOARCH.bpf, listed in golden_GOARCH.go) are
// made by `go generate ./seccomp-profiles`, which runs gen/ (sandbox/seccomp's
// Load and Compile, through libseccomp) on the machine's architecture, and
// are checked in; gen's TestGoldens fails when one differs from what the
// profiles and libseccomp give now. A run with a built-in profile loads its
// golden (see Compiled), so it neither parses JSON nor calls libseccomp.
//
// The package only hands out bytes: parsing, validation, compilation and
// the checks a golden passes before use live in sandbox/seccomp.
package seccompprofiles

//go:generate go run ./gen

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

// Filter is a built-in profile compiled to classic BPF at build time.
type Filter struct {
	// File is the golden the filter was read from, e.g.
	// "default.amd64.bpf".
	File string
	// Arch is the OCI name of the architecture the filter is for, e.g.
	// "SCMP_ARCH_X86_64".
	Arch string
	// ProfileSHA256 is the hex SHA-256 of the NAME.json the filter was
	// compiled from (for a variant, its profile's). The caller compares
	// it with Read's bytes: a difference means the binary was built from
	// an edited profile without `go generate`.
	ProfileSHA256 string
	// BPF is the struct sock_filter array, native endian; a copy, the
	// caller's to keep.
	BPF []byte
}

// golden is one row of the generated table: what Filter says, but the
// bytes.
type golden struct {
	file, arch, profileSHA256 string
}

// Compiled returns the built-in filter name compiled for the architecture
// this binary was built for: a profile ("default") or one of its variants
// ("default+loopback", the profile with AF_INET and AF_INET6 sockets
// allowed, or "default+proxy", with TCP sockets only; see
// sandbox/seccomp.LoopbackSuffix and ProxySuffix). ok is false when there is
// none: name is not a built-in filter, or nobody generated the goldens on
// this architecture.
func Compiled(name string) (f Filter, ok bool) {
	g, ok := goldens[name]
	if !ok {
		return Filter{}, false
	}
	b, err := goldenFiles.ReadFile(g.file)
	if err != nil {
		// The table and the embed directive are generated together: a
		// row without its file is a bug in gen.
		panic(fmt.Sprintf("seccompprofiles: bug: golden %s listed but not embedded: %v", g.file, err))
	}
	return Filter{File: g.file, Arch: g.arch, ProfileSHA256: g.profileSHA256, BPF: b}, true
}
