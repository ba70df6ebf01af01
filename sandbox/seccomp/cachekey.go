package seccomp

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"runtime/debug"
	"sync"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// cacheFormat names what this package makes of a plan and how it stores
// the result. Bump it on any change to compileFor (bad-arch action,
// attributes, optimisation level, how a rule becomes libseccomp calls) or
// to the cache file layout: entries written by an older nsbox then simply
// stop matching and are compiled afresh. (A change to compileFor also
// changes the goldens: `go generate ./seccomp-profiles`.)
const cacheFormat = 2

// bindingModule is the Go binding whose version goes into the key.
const bindingModule = "github.com/seccomp/libseccomp-golang"

// toolchain is the part of the key that is the same for every profile:
// what compiles, for which machine. Computed once per process.
var toolchain = sync.OnceValue(func() []byte {
	h := newKeyHash()
	h.u64(cacheFormat)
	// The architecture the filter is built for: Compile builds for the
	// native one only.
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		h.str("native arch unknown: " + err.Error())
	} else {
		h.str(native.String())
	}
	// The library that emits the BPF, as loaded at run time (the release
	// binary links it statically; a test binary may use the shared one):
	// another version may resolve names or lay out the tree differently.
	maj, min, mic := libseccomp.GetLibraryVersion()
	h.u64(uint64(maj))
	h.u64(uint64(min))
	h.u64(uint64(mic))
	// The API level libseccomp detected on this kernel decides which
	// actions and attributes it uses; it changes with the kernel.
	api, err := libseccomp.GetAPI()
	if err != nil {
		api = 0
	}
	h.u64(uint64(api))
	// The binding between us and the library.
	h.str(moduleVersion(bindingModule))
	sum := h.sum()
	return sum[:]
})

// moduleVersion is the version of module this binary was built with, or
// "unknown" when the build carries no module information.
func moduleVersion(module string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range info.Deps {
		if d.Path == module {
			if d.Replace != nil {
				return d.Version + "=>" + d.Replace.Path + "@" + d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// cacheKey is the SHA-256 of everything that decides the BPF Compile
// returns for p on this machine: the toolchain (see toolchain) and the
// profile's compiled meaning, that is its default action, its
// architectures and the plan handed to libseccomp rule by rule. The plan
// rather than the JSON bytes: it is exactly what compileFor reads, so a
// change in planning (this package) or in name resolution changes the key
// even when the file does not; and whitespace or comments do not.
func (p *Profile) cacheKey() [sha256.Size]byte {
	h := newKeyHash()
	h.raw(toolchain())
	h.action(p.defaultAct)
	h.u64(uint64(len(p.arches)))
	for _, a := range p.arches {
		h.str(string(a))
	}
	h.u64(uint64(len(p.plan)))
	for _, r := range p.plan {
		h.str(r.syscall)
		h.action(r.act)
		h.u64(uint64(len(r.conds)))
		for _, c := range r.conds {
			h.u64(uint64(c.index))
			h.str(string(c.op))
			h.u64(c.value)
			h.u64(c.datum)
		}
	}
	return h.sum()
}

// keyHash feeds fixed-width integers and length-prefixed strings to
// SHA-256, so that no two different sequences hash the same bytes. It
// buffers them in 4 KiB chunks: the key is computed on every cache miss of
// load, and a profile's plan encodes to tens of kilobytes.
type keyHash struct {
	h hash.Hash
	b []byte
}

func newKeyHash() *keyHash { return &keyHash{h: sha256.New(), b: make([]byte, 0, 4096+512)} }

// flush hands the buffer to the hash once it holds a chunk.
func (k *keyHash) flush() {
	if len(k.b) >= 4096 {
		k.h.Write(k.b)
		k.b = k.b[:0]
	}
}

func (k *keyHash) u64(v uint64) {
	k.b = binary.LittleEndian.AppendUint64(k.b, v)
	k.flush()
}

func (k *keyHash) str(s string) {
	k.b = binary.LittleEndian.AppendUint64(k.b, uint64(len(s)))
	k.b = append(k.b, s...)
	k.flush()
}

func (k *keyHash) action(a action) {
	k.str(string(a.kind))
	k.u64(uint64(a.errno))
}

func (k *keyHash) raw(b []byte) {
	k.b = append(k.b, b...)
	k.flush()
}

// sum returns the SHA-256 of everything fed.
func (k *keyHash) sum() [sha256.Size]byte {
	k.h.Write(k.b)
	k.b = k.b[:0]
	var out [sha256.Size]byte
	k.h.Sum(out[:0])
	return out
}
