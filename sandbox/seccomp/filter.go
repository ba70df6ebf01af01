package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// LoadFilter returns the filter for a run whose policy names profile, as
// the spec carries it to the init. It is the supervisor's one entry point:
//
//   - "none": nil and no error. The policy asks for no filter; the caller
//     must not read a nil Program as a failure to load one.
//   - A built-in profile ("default", "strict") or one of its variants
//     ("default+loopback", "default+proxy", "default+proxy+noproc": see
//     LoopbackSuffix, ProxySuffix and NoProcSuffix): the filter compiled at
//     build time for this architecture (seccompprofiles.Compiled): no
//     parsing, no libseccomp, no disk. Before use, the golden must have
//     been compiled from the very profile this binary embeds (else the
//     binary was built without `go generate ./seccomp-profiles` after the
//     profile changed: an error, never a guess) and must be whole
//     instructions within the kernel's limit (load.Check). On an
//     architecture nobody generated goldens on, the profile is compiled
//     here with libseccomp, as a user's profile is, without the cache:
//     the run is filtered all the same, only slower, and the test suite
//     fails there until the goldens are generated.
//   - An absolute path: a user's profile, read, parsed and compiled with
//     libseccomp, through the compiled-filter cache in cacheDir (see
//     fileCache); cacheDir "" means no cache.
//   - Anything else is an error.
//
// A problem in a profile is a *ProfileError naming the file and the line.
// The caller checks Supported first: a filter is only worth loading on a
// kernel that can run it.
func LoadFilter(profile, cacheDir string) (*Program, error) {
	switch {
	case profile == "none":
		return nil, nil
	case filepath.IsAbs(profile):
		if cacheDir == "" {
			p, err := Load(profile)
			if err != nil {
				return nil, err
			}
			return p.Compile()
		}
		prog, _, err := fileCache{dir: cacheDir}.load(profile)
		return prog, err
	case IsBuiltin(profile):
		return loadBuiltin(profile, seccompprofiles.Compiled)
	default:
		return nil, notAProfile(profile)
	}
}

// loadBuiltin returns the built-in profile name's filter from its golden,
// which compiled looks up (seccompprofiles.Compiled, or a test's stand-in);
// see LoadFilter.
func loadBuiltin(name string, compiled func(string) (seccompprofiles.Filter, bool)) (*Program, error) {
	golden, ok := compiled(name)
	if !ok {
		p, err := Load(name)
		if err != nil {
			return nil, err
		}
		return p.Compile()
	}
	// A variant is compiled from its base profile's JSON.
	base := baseOf(name)
	data, err := seccompprofiles.Read(base)
	if err != nil {
		return nil, fmt.Errorf("load seccomp profile %q: %w", name, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != golden.ProfileSHA256 {
		return nil, fmt.Errorf("load built-in seccomp filter seccomp-profiles/%s: compiled from a %s.json with SHA-256 %s, this binary embeds one with %s: rebuild after `go generate ./seccomp-profiles`",
			golden.File, base, golden.ProfileSHA256, got)
	}
	if err := load.Check(golden.BPF); err != nil {
		return nil, fmt.Errorf("load built-in seccomp filter seccomp-profiles/%s: %w", golden.File, err)
	}
	return &Program{Profile: name, SHA256: golden.ProfileSHA256, Arch: specs.Arch(golden.Arch), Raw: golden.BPF}, nil
}
