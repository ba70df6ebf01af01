package seccomp

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"sync"
)

// selfExe is the running binary, whatever name it was started by.
const selfExe = "/proc/self/exe"

// buildID is the Go build ID of the running binary, read once per
// process. The go command derives it from every input of the link, so any change to nsbox's code, its dependencies
// or the statically linked libseccomp gives another one: the first-level
// cache key (see rawKey) then changes without anyone bumping a version.
var buildID = sync.OnceValues(func() (string, error) { return readBuildID(selfExe) })

// elfNoteGoBuildID is the type of Go's build ID note (cmd/internal/buildid).
const elfNoteGoBuildID = 4

// readBuildID returns the payload of the ELF note .note.go.buildid of the
// file at path: the string `go tool buildid` prints.
func readBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("read go build id of %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return "", fmt.Errorf("read go build id of %s: no .note.go.buildid section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return "", fmt.Errorf("read go build id of %s: %w", path, err)
	}
	// An ELF note: namesz, descsz and type (4 bytes each, the file's byte
	// order), the name "Go\0" padded to 4 bytes, then the payload.
	const header = 16
	if len(data) < header {
		return "", fmt.Errorf("read go build id of %s: note of %d bytes: %w", path, len(data), errBadBuildID)
	}
	order := f.ByteOrder
	namesz, descsz, typ := order.Uint32(data[0:]), order.Uint32(data[4:]), order.Uint32(data[8:])
	if namesz != 4 || typ != elfNoteGoBuildID || !bytes.Equal(data[12:header], []byte("Go\x00\x00")) {
		return "", fmt.Errorf("read go build id of %s: note name size %d, type %d, name %q: %w", path, namesz, typ, data[12:header], errBadBuildID)
	}
	if descsz == 0 || uint64(descsz) > uint64(len(data)-header) {
		return "", fmt.Errorf("read go build id of %s: payload of %d bytes in a %d-byte note: %w", path, descsz, len(data), errBadBuildID)
	}
	return string(data[header : header+int(descsz)]), nil
}

// errBadBuildID marks a build ID note that is there but malformed.
var errBadBuildID = errors.New("malformed go build id note")
