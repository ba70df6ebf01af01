package seccomp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// fileCache keeps the filters compiled from users' profile files on disk,
// so that a run whose profile, machine and libseccomp were seen before
// reads its BPF back instead of compiling it again (what that saves per
// run: docs/benchmarks.md). The built-in profiles never come here: they
// are compiled at build time (see LoadFilter).
//
// An entry is dir/KEY.bpf, KEY being the hex key (rawKey for the bytes
// of a file, cacheKey for a parsed plan): the file name says what the
// filter was compiled from, so there is nothing to invalidate; an entry
// for an old profile or an old libseccomp is just never read again.
//
// The cache is an optimisation only. An entry that is missing, torn or
// otherwise wrong is ignored and replaced, and a directory that cannot be
// written (a read-only state directory) means compiling every time: neither
// ever fails a run.
//
// Every entry read is verified (see readEntry): its header repeats the key
// and carries the SHA-256 of the instructions, checked on each read. This
// guards against torn, truncated and corrupt files, not against attackers:
// the directory is root's (0700, under the state directory) and whoever
// can write it is root already, able to replace the nsbox binary itself.
type fileCache struct {
	// dir holds the entries; created (0700) on the first store.
	dir string

	// buildID returns the running binary's Go build ID for load's key;
	// nil means buildID (the package's, read from /proc/self/exe). Tests
	// set it to change or break the build ID.
	buildID func() (string, error)
}

// cacheOutcome says what compile did, for the tests.
type cacheOutcome int

const (
	cacheHit     cacheOutcome = iota // a valid entry was read
	cacheStored                      // compiled and stored
	cacheNoStore                     // compiled; the entry could not be written
	cacheRawHit                      // load found the file's bytes: nothing parsed
)

// compile returns p compiled for the native architecture, from the cache
// when it holds a valid entry, else from libseccomp, storing the result;
// the outcome says which. Its errors are Compile's: a store error is kept
// in the outcome only, a failed cache being a slow run, not a failed one.
func (c fileCache) compile(p *Profile) (*Program, cacheOutcome, error) {
	// The architecture check comes before the lookup: the key names the
	// profile's architectures, but the entry must never stand in for the
	// error a profile written for another machine gets.
	native, name, err := p.nativeArch()
	if err != nil {
		return nil, cacheNoStore, err
	}
	key := p.cacheKey()
	path := c.path(key)
	if raw, err := readEntry(path, key); err == nil {
		return &Program{Profile: p.Name, SHA256: p.SHA256, Arch: name, Raw: raw}, cacheHit, nil
	}
	prog, err := p.compileFor(native)
	if err != nil {
		return nil, cacheNoStore, err
	}
	if err := c.store(path, key, prog.Raw); err != nil {
		return prog, cacheNoStore, nil
	}
	return prog, cacheStored, nil
}

// path is the entry for key.
func (c fileCache) path(key [sha256.Size]byte) string {
	return filepath.Join(c.dir, hex.EncodeToString(key[:])+".bpf")
}

// An entry is a fixed header and the instructions:
//
//	magic   8 bytes  "NSBXBPF\n"
//	format  4 bytes  cacheFormat, little endian
//	count   4 bytes  number of 8-byte instructions, little endian
//	key    32 bytes  the cacheKey the entry was stored under
//	sum    32 bytes  SHA-256 of the instructions
//	insns   count*8  struct sock_filter array, native endian (as Raw)
//
// The arch, and so the byte order, is part of the key.
const (
	entryMagic  = "NSBXBPF\n"
	entryHeader = 8 + 4 + 4 + sha256.Size + sha256.Size
)

// encodeEntry lays out the entry for raw under key.
func encodeEntry(key [sha256.Size]byte, raw []byte) []byte {
	sum := sha256.Sum256(raw)
	b := make([]byte, 0, entryHeader+len(raw))
	b = append(b, entryMagic...)
	b = binary.LittleEndian.AppendUint32(b, cacheFormat)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(raw)/8))
	b = append(b, key[:]...)
	b = append(b, sum[:]...)
	return append(b, raw...)
}

// errBadEntry marks an entry that exists but cannot be used.
var errBadEntry = errors.New("invalid seccomp cache entry")

// readEntry returns the instructions of the entry at path if it is one this
// process would have written for key. Any error means "compile instead".
func readEntry(path string, key [sha256.Size]byte) ([]byte, error) {
	// O_NOFOLLOW: entries are plain files this package renamed into place;
	// a symbolic link is not one of them.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open seccomp cache entry %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat seccomp cache entry %s: %w", path, err)
	}
	// Sizes first, before reading anything: a header and 1 to load.MaxInsns
	// whole instructions.
	size := st.Size()
	if !st.Mode().IsRegular() || size < entryHeader+8 || size > entryHeader+8*load.MaxInsns || (size-entryHeader)%8 != 0 {
		return nil, fmt.Errorf("seccomp cache entry %s: %s of %d bytes: %w", path, st.Mode().Type(), size, errBadEntry)
	}
	// Written by this euid (root for the supervisor) or not ours.
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("seccomp cache entry %s: not owned by uid %d: %w", path, os.Geteuid(), errBadEntry)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read seccomp cache entry %s: %w", path, err)
	}
	raw := b[entryHeader:]
	// The header must match what encodeEntry writes for these
	// instructions, field by field.
	if !bytes.Equal(b[:entryHeader], encodeEntry(key, raw)[:entryHeader]) {
		return nil, fmt.Errorf("seccomp cache entry %s: header or checksum mismatch: %w", path, errBadEntry)
	}
	return raw, nil
}

// store writes the entry for key atomically: into a temporary file in the
// same directory, synced, then renamed over path. A reader (another run, at
// the same time) sees either no entry, the old one or the whole new one;
// concurrent stores of the same key write the same bytes, and the last
// rename wins.
func (c fileCache) store(path string, key [sha256.Size]byte, raw []byte) (err error) {
	// 0700: the state directory's own mode; MkdirAll leaves existing
	// directories alone.
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("create seccomp cache dir %s: %w", c.dir, err)
	}
	// CreateTemp makes the file 0600 with O_EXCL and a random name.
	f, err := os.CreateTemp(c.dir, ".tmp-*.bpf")
	if err != nil {
		return fmt.Errorf("create seccomp cache entry in %s: %w", c.dir, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(encodeEntry(key, raw)); err != nil {
		return fmt.Errorf("write seccomp cache entry %s: %w", f.Name(), err)
	}
	// No fsync, of the file or the directory: after a crash the name may
	// point at an empty or partly written file, which readEntry's
	// checksum refuses and the next run rewrites. An fsync would about
	// double the cost of the run that stores, to save one compile after a
	// power loss.
	if err := f.Close(); err != nil {
		return fmt.Errorf("close seccomp cache entry %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename seccomp cache entry %s to %s: %w", f.Name(), path, err)
	}
	return nil
}
