package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
)

// rawKeyFormat names what load's first-level key covers and how. Bump it
// on any change to what goes into rawKey; a change to parsing, planning or
// compiling needs no bump, the build ID changes with it.
const rawKeyFormat = 2

// rawKeyDomain starts every first-level key's hash: no sequence fed to a
// plan key (cacheKey, which starts with the toolchain's 32 bytes) hashes
// the same bytes.
const rawKeyDomain = "nsbox seccomp profile bytes"

// load returns the profile file at path (absolute) compiled for the native
// architecture, and what the cache did. A file whose exact bytes an
// earlier run of the same nsbox binary compiled is read back without
// parsing: parsing and planning cost a good part of a compile (libseccomp
// resolves each syscall name). Otherwise it parses, with Load's errors,
// compiles through compile (the plan-keyed entry, so a profile that
// changed only in whitespace or comments still skips libseccomp's BPF
// generation) and stores the result under the bytes' key too.
//
// A profile that does not parse is never cached: every call reports the
// same *ProfileError. As with compile, the cache's own problems are never
// returned.
func (c fileCache) load(path string) (*Program, cacheOutcome, error) {
	// The bytes are read as Load reads them, every time, with its checks
	// (absolute, regular, size cap).
	src, err := readSource(path)
	if err != nil {
		return nil, cacheNoStore, err
	}
	if src.builtin {
		// LoadFilter sends the built-in profiles to their goldens.
		return nil, cacheNoStore, fmt.Errorf("seccomp: bug: built-in profile %q sent to the file cache", path)
	}
	// The profile's hash is both the run record's SHA256 and the part of
	// the key that stands for the bytes.
	sum := sha256.Sum256(src.data)
	key, keyed := c.rawKey(src, sum)
	if keyed {
		// An entry exists only for bytes that parsed and compiled for
		// this machine, so a hit needs neither the parser's verdict nor
		// its architecture check (the native arch is in toolchain()).
		if raw, err := readEntry(c.path(key), key); err == nil {
			if arch, err := nativeArchName(); err == nil {
				return &Program{Profile: src.name, SHA256: hex.EncodeToString(sum[:]), Arch: arch, Raw: raw}, cacheRawHit, nil
			}
		}
	}
	p, err := parse(src.name, src.source, src.data)
	if err != nil {
		return nil, cacheNoStore, err
	}
	prog, outcome, err := c.compile(p)
	if err != nil {
		return nil, cacheNoStore, err
	}
	// Best effort, as in compile: a failed store is a slower next run.
	if keyed {
		_ = c.store(c.path(key), key, prog.Raw)
	}
	return prog, outcome, nil
}

// rawKey is the SHA-256 of everything that decides load's result for the
// bytes of src, whose SHA-256 is sum: the key format, the running binary's
// Go build ID (standing for every line of the parser, the planner and the
// compiler), the toolchain (libseccomp as loaded, the kernel's API level,
// the native architecture: see toolchain), the file's path, and the bytes
// (through their SHA-256). ok is false when the build ID cannot be read:
// without it a changed parser could be answered by an old entry, so load
// then parses every time.
func (c fileCache) rawKey(src *source, sum [sha256.Size]byte) (key [sha256.Size]byte, ok bool) {
	get := c.buildID
	if get == nil {
		get = buildID
	}
	id, err := get()
	if err != nil || id == "" {
		return key, false
	}
	h := newKeyHash()
	h.str(rawKeyDomain)
	h.u64(rawKeyFormat)
	h.str(id)
	h.raw(toolchain())
	h.str(src.name)
	h.raw(sum[:])
	return h.sum(), true
}

// nativeArchName is this machine's architecture in the OCI's name, as a
// Program reports it. Computed once per process.
var nativeArchName = sync.OnceValues(func() (specs.Arch, error) {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return "", fmt.Errorf("seccomp native architecture: %w", err)
	}
	for n, a := range archs {
		if a == native {
			return n, nil
		}
	}
	return "", fmt.Errorf("seccomp native architecture %s: no OCI name", native)
})
