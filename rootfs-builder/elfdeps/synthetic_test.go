package elfdeps

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// spec describes a synthetic ELF object: just headers, PT_INTERP and a
// dynamic section, which is all the loader (and this package) reads.
type spec struct {
	class    elf.Class // default ELFCLASS64
	machine  elf.Machine
	interp   string
	needed   []string
	rpath    string // "" for none
	runpath  string // "" for none
	nodeflib bool
	static   bool // no PT_DYNAMIC
}

const synthBase = 0x400000 // vaddr of the single PT_LOAD, which maps the whole file

// writeELF writes a little-endian object described by s to path.
func writeELF(t testing.TB, path string, s spec) {
	t.Helper()
	is64 := s.class != elf.ELFCLASS32
	word, ehsize, phsize, dynsize := 4, 52, 32, 8
	if is64 {
		word, ehsize, phsize, dynsize = 8, 64, 56, 16
	}
	le := binary.LittleEndian
	put := func(b []byte, size int, v uint64) {
		switch size {
		case 2:
			le.PutUint16(b, uint16(v))
		case 4:
			le.PutUint32(b, uint32(v))
		default:
			le.PutUint64(b, v)
		}
	}

	// String table, then the dynamic array.
	strtab := []byte{0}
	str := func(v string) uint64 { off := len(strtab); strtab = append(strtab, v+"\x00"...); return uint64(off) }
	type dyn struct {
		tag elf.DynTag
		val uint64
	}
	var dyns []dyn
	for _, n := range s.needed {
		dyns = append(dyns, dyn{elf.DT_NEEDED, str(n)})
	}
	if s.rpath != "" {
		dyns = append(dyns, dyn{elf.DT_RPATH, str(s.rpath)})
	}
	if s.runpath != "" {
		dyns = append(dyns, dyn{elf.DT_RUNPATH, str(s.runpath)})
	}
	if s.nodeflib {
		dyns = append(dyns, dyn{elf.DT_FLAGS_1, uint64(elf.DF_1_NODEFLIB)})
	}

	nph := 1
	if s.interp != "" {
		nph++
	}
	if !s.static {
		nph++
	}
	interpOff := ehsize + nph*phsize
	strOff := interpOff + len(s.interp) + 1
	dynOff := strOff + len(strtab)
	dynOff += (8 - dynOff%8) % 8
	total := dynOff + (len(dyns)+3)*dynsize // + DT_STRTAB, DT_STRSZ, DT_NULL
	dyns = append(dyns, dyn{elf.DT_STRTAB, synthBase + uint64(strOff)}, dyn{elf.DT_STRSZ, uint64(len(strtab))}, dyn{elf.DT_NULL, 0})

	b := make([]byte, total)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS32)
	if is64 {
		b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	}
	b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	put(b[16:], 2, uint64(elf.ET_DYN))
	put(b[18:], 2, uint64(s.machine))
	put(b[20:], 4, uint64(elf.EV_CURRENT))
	phoffAt := 28 // e_phoff; e_shoff and e_flags, then e_ehsize, e_phentsize, e_phnum
	if is64 {
		phoffAt = 32
	}
	put(b[phoffAt:], word, uint64(ehsize))
	rest := phoffAt + 2*word + 4
	put(b[rest:], 2, uint64(ehsize))
	put(b[rest+2:], 2, uint64(phsize))
	put(b[rest+4:], 2, uint64(nph))

	ph := b[ehsize:]
	prog := func(typ elf.ProgType, off, size int) {
		put(ph, 4, uint64(typ))
		if is64 { // type, flags, offset, vaddr, paddr, filesz, memsz, align
			put(ph[8:], 8, uint64(off))
			put(ph[16:], 8, synthBase+uint64(off))
			put(ph[32:], 8, uint64(size))
			put(ph[40:], 8, uint64(size))
		} else { // type, offset, vaddr, paddr, filesz, memsz, flags, align
			put(ph[4:], 4, uint64(off))
			put(ph[8:], 4, synthBase+uint64(off))
			put(ph[16:], 4, uint64(size))
			put(ph[20:], 4, uint64(size))
		}
		ph = ph[phsize:]
	}
	prog(elf.PT_LOAD, 0, total)
	if s.interp != "" {
		prog(elf.PT_INTERP, interpOff, len(s.interp)+1)
		copy(b[interpOff:], s.interp)
	}
	if !s.static {
		prog(elf.PT_DYNAMIC, dynOff, len(dyns)*dynsize)
		copy(b[strOff:], strtab)
		d := b[dynOff:]
		for _, e := range dyns {
			put(d, word, uint64(e.tag))
			put(d[word:], word, e.val)
			d = d[dynsize:]
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestParseSynthetic(t *testing.T) {
	dir := t.TempDir()
	for _, class := range []elf.Class{elf.ELFCLASS32, elf.ELFCLASS64} {
		p := filepath.Join(dir, class.String())
		want := spec{class: class, machine: elf.EM_AARCH64, interp: "/ld.so", needed: []string{"liba.so", "libb.so.1"}, runpath: "/x::/y", nodeflib: true}
		writeELF(t, p, want)
		o, err := readObject(p)
		if err != nil {
			t.Fatalf("%s: %v", class, err)
		}
		if o.class != class || o.machine != elf.EM_AARCH64 || o.interp != "/ld.so" || !o.nodeflib || !o.hasRun ||
			!slices.Equal(o.needed, want.needed) || !slices.Equal(o.runpath, []string{"/x", "/y"}) || o.rpath != nil {
			t.Errorf("%s: parsed %+v", class, o)
		}
	}
}

func TestClosureSynthetic(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	x86 := elf.EM_X86_64
	lib := func(rel string, s spec) {
		if s.machine == 0 {
			s.machine = x86
		}
		writeELF(t, filepath.Join(dir, rel), s)
	}
	lib("ld.so", spec{static: true})
	// Found through the program's DT_RPATH, skipping another machine's copy.
	lib("wrong/libnsbox-a.so", spec{machine: elf.EM_AARCH64})
	lib("right/libnsbox-a.so", spec{needed: []string{"libnsbox-b.so"}})
	// Found through the DT_RPATH inherited from the program, skipping a
	// 32-bit copy and a non-ELF file.
	lib("wrong/libnsbox-b.so", spec{class: elf.ELFCLASS32})
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/libnsbox-b.so"), []byte("INPUT(x)"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib("right/libnsbox-b.so", spec{needed: []string{"libnsbox-c.so"}, runpath: "${ORIGIN}/sub"})
	// Found through DT_RUNPATH with ${ORIGIN}; needs a library by path.
	lib("right/sub/libnsbox-c.so", spec{needed: []string{"$ORIGIN/../by-path.so"}})
	lib("right/by-path.so", spec{})
	// DT_RPATH is ignored when DT_RUNPATH is present.
	lib("alt/libnsbox-a.so", spec{})
	// A library with DT_RUNPATH does not inherit its loader's DT_RPATH.
	lib("right/libnsbox-e.so", spec{needed: []string{"libnsbox-b.so"}, runpath: "/nonexistent"})

	prog := filepath.Join(dir, "bin/prog")
	lib("bin/prog", spec{interp: dir + "/ld.so", needed: []string{"libnsbox-a.so"}, rpath: "$ORIGIN/../$LIB:$ORIGIN:$ORIGIN/../wrong:$ORIGIN/../right"})
	got, err := Closure([]string{prog})
	if err != nil {
		t.Fatal(err)
	}
	r := dir + "/bin/../right/"
	want := []string{r + "libnsbox-a.so", r + "libnsbox-b.so", r + "sub/../by-path.so", r + "sub/libnsbox-c.so", dir + "/ld.so"}
	if !slices.Equal(got, want) {
		t.Errorf("closure:\n got %q\nwant %q", got, want)
	}

	lib("bin/both", spec{needed: []string{"libnsbox-a.so"}, rpath: "$ORIGIN/../right", runpath: "$ORIGIN/../alt"})
	got, err = Closure([]string{filepath.Join(dir, "bin/both")})
	if err != nil || !slices.Equal(got, []string{dir + "/bin/../alt/libnsbox-a.so"}) {
		t.Errorf("RUNPATH over RPATH: got %q, %v", got, err)
	}

	lib("bin/runpath-blocks", spec{needed: []string{"libnsbox-e.so"}, rpath: "$ORIGIN/../right"})
	_, err = Closure([]string{filepath.Join(dir, "bin/runpath-blocks")})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "libnsbox-b.so needed by "+r+"libnsbox-e.so") {
		t.Errorf("RUNPATH blocking inheritance: got %v", err)
	}

	lib("bin/static", spec{static: true})
	got, err = Closure([]string{filepath.Join(dir, "bin/static")})
	if err != nil || len(got) != 0 {
		t.Errorf("static: got %q, %v", got, err)
	}

	// -z nodeflib: ld.so.conf and the default dirs are not searched.
	lib("bin/nodeflib", spec{needed: []string{"libc.so.6"}, nodeflib: true})
	_, err = Closure([]string{filepath.Join(dir, "bin/nodeflib")})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("nodeflib: got %v, want ErrNotFound", err)
	}

	// Inputs are not part of their own closure, even when needed.
	got, err = Closure([]string{prog, r + "libnsbox-b.so"})
	if err != nil || slices.Contains(got, r+"libnsbox-b.so") || !slices.Contains(got, r+"libnsbox-a.so") {
		t.Errorf("inputs in closure: got %q, %v", got, err)
	}
}

func TestClosureConfDirs(t *testing.T) {
	dir := t.TempDir()
	writeELF(t, filepath.Join(dir, "prog"), spec{machine: elf.EM_X86_64, needed: []string{"libnsbox-conf.so"}})
	writeELF(t, filepath.Join(dir, "libs/libnsbox-conf.so"), spec{machine: elf.EM_X86_64})
	conf := filepath.Join(dir, "ld.so.conf")
	if err := os.WriteFile(conf, []byte(dir+"/libs/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := newResolver(conf).closure([]string{filepath.Join(dir, "prog")})
	if err != nil || !slices.Equal(got, []string{dir + "/libs/libnsbox-conf.so"}) {
		t.Errorf("got %q, %v", got, err)
	}
}

// FuzzParseObject checks that no input makes the parser panic or allocate
// without bound. Seeds are the synthetic objects and the host interpreter.
func FuzzParseObject(f *testing.F) {
	dir := f.TempDir()
	for i, s := range []spec{
		{machine: elf.EM_X86_64, interp: "/ld.so", needed: []string{"liba.so"}, rpath: "$ORIGIN"},
		{class: elf.ELFCLASS32, machine: elf.EM_386, needed: []string{"libb.so"}, runpath: "/x", nodeflib: true},
		{static: true},
	} {
		p := filepath.Join(dir, strconv.Itoa(i))
		writeELF(f, p, s)
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	if b, err := os.ReadFile(hostPython); err == nil {
		f.Add(b[:min(len(b), 1<<16)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseObject(bytes.NewReader(b))
	})
}
