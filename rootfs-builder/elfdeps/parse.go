package elfdeps

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// Bounds on what we read from a file, so a hostile or corrupt ELF cannot make
// us allocate without limit. Real objects are far below these.
const (
	headRead   = 4096    // first read: ELF header and, usually, the program headers
	maxPhnum   = 4096    // program headers
	maxDynamic = 1 << 20 // bytes of PT_DYNAMIC
	maxString  = 4096    // one dynamic string (PATH_MAX)
)

// ErrNotELF reports a file that is not an ELF object.
var ErrNotELF = errors.New("not an ELF file")

// object is what the dynamic loader needs from one ELF file: its identity,
// its program interpreter and its dynamic section. Section headers are never
// read, as ld.so does not read them either.
type object struct {
	class    elf.Class
	machine  elf.Machine
	interp   string   // PT_INTERP, "" if none
	needed   []string // DT_NEEDED, in order
	rpath    []string // DT_RPATH elements; nil when DT_RUNPATH is present (ld.so ignores it then)
	runpath  []string // DT_RUNPATH elements
	hasRun   bool     // DT_RUNPATH present (possibly empty)
	nodeflib bool     // DF_1_NODEFLIB: skip ld.so.conf and default dirs
}

// phdr is the part of a program header we use.
type phdr struct {
	typ                elf.ProgType
	off, vaddr, filesz uint64
}

// readObject parses the ELF header, program headers, PT_INTERP and PT_DYNAMIC
// of path. A file that is not ELF yields an error wrapping ErrNotELF.
func readObject(path string) (*object, error) {
	// O_NONBLOCK: a FIFO planted in a search directory must not hang us.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	o, err := parseObject(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

func parseObject(r io.ReaderAt) (*object, error) {
	head := make([]byte, headRead)
	n, err := r.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	head = head[:n]
	if len(head) < elf.EI_NIDENT || !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return nil, ErrNotELF
	}
	o := &object{class: elf.Class(head[elf.EI_CLASS])}
	var bo binary.ByteOrder
	switch elf.Data(head[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: bad data encoding %d", ErrNotELF, head[elf.EI_DATA])
	}

	// Header fields: e_machine is at 18 in both classes; e_phoff, e_phentsize
	// and e_phnum move with the word size.
	var phoff uint64
	var phentsize, phnum, want int
	switch o.class {
	case elf.ELFCLASS64:
		if len(head) < 64 {
			return nil, fmt.Errorf("%w: truncated header", ErrNotELF)
		}
		phoff = bo.Uint64(head[32:])
		phentsize, phnum, want = int(bo.Uint16(head[54:])), int(bo.Uint16(head[56:])), 56
	case elf.ELFCLASS32:
		if len(head) < 52 {
			return nil, fmt.Errorf("%w: truncated header", ErrNotELF)
		}
		phoff = uint64(bo.Uint32(head[28:]))
		phentsize, phnum, want = int(bo.Uint16(head[42:])), int(bo.Uint16(head[44:])), 32
	default:
		return nil, fmt.Errorf("%w: bad class %d", ErrNotELF, head[elf.EI_CLASS])
	}
	o.machine = elf.Machine(bo.Uint16(head[18:]))
	if phnum == 0 {
		return o, nil // nothing to load: no interpreter, no dependencies
	}
	if phentsize != want || phnum > maxPhnum {
		return nil, fmt.Errorf("bad program headers (entsize %d, count %d)", phentsize, phnum)
	}
	raw, err := readAt(r, head, phoff, uint64(phnum*phentsize))
	if err != nil {
		return nil, fmt.Errorf("program headers: %w", err)
	}
	progs := make([]phdr, phnum)
	for i := range progs {
		b := raw[i*phentsize:]
		if o.class == elf.ELFCLASS64 {
			progs[i] = phdr{elf.ProgType(bo.Uint32(b)), bo.Uint64(b[8:]), bo.Uint64(b[16:]), bo.Uint64(b[32:])}
		} else {
			progs[i] = phdr{elf.ProgType(bo.Uint32(b)), uint64(bo.Uint32(b[4:])), uint64(bo.Uint32(b[8:])), uint64(bo.Uint32(b[16:]))}
		}
	}
	for _, p := range progs {
		switch p.typ {
		case elf.PT_INTERP:
			b, err := readAt(r, head, p.off, min(p.filesz, maxString))
			if err != nil {
				return nil, fmt.Errorf("PT_INTERP: %w", err)
			}
			o.interp = cstring(b)
		case elf.PT_DYNAMIC:
			if err := o.parseDynamic(r, head, bo, progs, p); err != nil {
				return nil, fmt.Errorf("PT_DYNAMIC: %w", err)
			}
		}
	}
	return o, nil
}

// parseDynamic decodes the dynamic array. String values are offsets into
// DT_STRTAB, whose address is mapped to a file offset through the PT_LOAD
// segments, exactly as the loader sees it once mapped.
func (o *object) parseDynamic(r io.ReaderAt, head []byte, bo binary.ByteOrder, progs []phdr, dyn phdr) error {
	d, err := readAt(r, head, dyn.off, min(dyn.filesz, maxDynamic))
	if err != nil {
		return err
	}
	entsize := 16
	if o.class == elf.ELFCLASS32 {
		entsize = 8
	}
	var needed []uint64
	var rpath, runpath, strtab, strsz uint64
	var hasRpath bool
loop:
	for ; len(d) >= entsize; d = d[entsize:] {
		var tag elf.DynTag
		var val uint64
		if entsize == 16 {
			tag, val = elf.DynTag(bo.Uint64(d)), bo.Uint64(d[8:])
		} else {
			tag, val = elf.DynTag(bo.Uint32(d)), uint64(bo.Uint32(d[4:]))
		}
		switch tag {
		case elf.DT_NULL:
			break loop
		case elf.DT_NEEDED:
			needed = append(needed, val)
		case elf.DT_RPATH:
			rpath, hasRpath = val, true
		case elf.DT_RUNPATH:
			runpath, o.hasRun = val, true
		case elf.DT_STRTAB:
			strtab = val
		case elf.DT_STRSZ:
			strsz = val
		case elf.DT_FLAGS_1:
			o.nodeflib = val&uint64(elf.DF_1_NODEFLIB) != 0
		}
	}
	if len(needed) == 0 && !hasRpath && !o.hasRun {
		return nil // static PIE or an object without string entries
	}
	stroff, ok := vaddrToOffset(progs, strtab)
	if !ok {
		return fmt.Errorf("DT_STRTAB %#x is not in any PT_LOAD segment", strtab)
	}
	str := func(off uint64) (string, error) {
		if off >= strsz {
			return "", fmt.Errorf("string offset %#x beyond DT_STRSZ %#x", off, strsz)
		}
		b, err := readAt(r, head, stroff+off, min(strsz-off, maxString))
		return cstring(b), err
	}
	for _, off := range needed {
		s, err := str(off)
		if err != nil {
			return fmt.Errorf("DT_NEEDED: %w", err)
		}
		o.needed = append(o.needed, s)
	}
	// When both are present ld.so ignores DT_RPATH.
	if hasRpath && !o.hasRun {
		s, err := str(rpath)
		if err != nil {
			return fmt.Errorf("DT_RPATH: %w", err)
		}
		o.rpath = splitPath(s)
	}
	if o.hasRun {
		s, err := str(runpath)
		if err != nil {
			return fmt.Errorf("DT_RUNPATH: %w", err)
		}
		o.runpath = splitPath(s)
	}
	return nil
}

func vaddrToOffset(progs []phdr, addr uint64) (uint64, bool) {
	for _, p := range progs {
		if p.typ == elf.PT_LOAD && addr >= p.vaddr && addr-p.vaddr < p.filesz {
			return p.off + (addr - p.vaddr), true
		}
	}
	return 0, false
}

// readAt returns n bytes at off, served from head when it covers them.
// A short read is an error.
func readAt(r io.ReaderAt, head []byte, off, n uint64) ([]byte, error) {
	if off <= uint64(len(head)) && n <= uint64(len(head))-off {
		return head[off : off+n], nil
	}
	if off+n < off || int64(off+n) < 0 {
		return nil, fmt.Errorf("range %#x+%#x overflows", off, n)
	}
	b := make([]byte, n)
	got, err := r.ReadAt(b, int64(off))
	if got == len(b) {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

// cstring returns b up to its first NUL.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// splitPath splits a colon-separated search path. Empty elements (which ld.so
// takes as the current directory) are dropped: they cannot be mirrored.
func splitPath(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ":") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}
