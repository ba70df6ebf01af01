package seccomp

import (
	"fmt"
	"io"
	"os"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// Program is a compiled filter: what crosses from the supervisor into the
// init, which only needs Raw.
type Program struct {
	Profile string     // the Profile's Name
	SHA256  string     // the Profile's SHA256
	Arch    specs.Arch // the architecture it filters, e.g. SCMP_ARCH_X86_64
	// Raw is the struct sock_filter array: 8 bytes per instruction, native
	// endian, ready for Install.
	Raw []byte
}

// archs maps the OCI architecture names to libseccomp's.
var archs = map[specs.Arch]libseccomp.ScmpArch{
	specs.ArchX86:         libseccomp.ArchX86,
	specs.ArchX86_64:      libseccomp.ArchAMD64,
	specs.ArchX32:         libseccomp.ArchX32,
	specs.ArchARM:         libseccomp.ArchARM,
	specs.ArchAARCH64:     libseccomp.ArchARM64,
	specs.ArchPPC64LE:     libseccomp.ArchPPC64LE,
	specs.ArchS390X:       libseccomp.ArchS390X,
	specs.ArchRISCV64:     libseccomp.ArchRISCV64,
	specs.ArchLOONGARCH64: libseccomp.ArchLOONGARCH64,
}

func knownArch(a specs.Arch) bool {
	_, ok := archs[a]
	return ok
}

// knownSyscall reports an error unless libseccomp knows name on some
// architecture (it may still not exist on the native one: "open" on
// aarch64; Compile then skips it).
func knownSyscall(name string) error {
	if _, err := libseccomp.GetSyscallFromName(name); err != nil {
		maj, min, mic := libseccomp.GetLibraryVersion()
		return fmt.Errorf("syscall unknown to libseccomp %d.%d.%d", maj, min, mic)
	}
	return nil
}

// Compile turns the profile into a classic BPF program for the native
// architecture. It runs in the supervisor, before the init starts: the init
// only loads the result (see Install).
func (p *Profile) Compile() (*Program, error) {
	native, _, err := p.nativeArch()
	if err != nil {
		return nil, err
	}
	return p.compileFor(native)
}

// nativeArch returns this machine's architecture, in libseccomp's and the
// OCI's names, or an error if the profile does not list it.
func (p *Profile) nativeArch() (libseccomp.ScmpArch, specs.Arch, error) {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return 0, "", fmt.Errorf("compile seccomp profile %s: native architecture: %w", p.Source, err)
	}
	name, err := p.archName(native)
	if err != nil {
		return 0, "", err
	}
	return native, name, nil
}

// archName returns the OCI name of arch, or an error if the profile does
// not list it.
func (p *Profile) archName(arch libseccomp.ScmpArch) (specs.Arch, error) {
	var name specs.Arch
	for n, a := range archs {
		if a == arch {
			name = n
		}
	}
	if !slices.Contains(p.arches, name) {
		return "", fmt.Errorf("compile seccomp profile %s: it lists %v, not this machine's %s (%s)", p.Source, p.arches, name, arch)
	}
	return name, nil
}

// compileFor compiles for arch; tests use it to check the other listed
// architectures compile too.
func (p *Profile) compileFor(arch libseccomp.ScmpArch) (*Program, error) {
	name, err := p.archName(arch)
	if err != nil {
		return nil, err
	}
	filter, err := libseccomp.NewFilter(scmpAction(p.defaultAct))
	if err != nil {
		return nil, fmt.Errorf("compile seccomp profile %s: new filter: %w", p.Source, err)
	}
	defer filter.Release()
	// Another ABI (x86 int 0x80, x32) has other syscall numbers: the
	// filter would judge them by the wrong table. No CPython does it.
	if err := filter.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return nil, fmt.Errorf("compile seccomp profile %s: set bad-arch action: %w", p.Source, err)
	}
	// A binary tree over syscall numbers (SCMP_FLTATR_CTL_OPTIMIZE 2,
	// libseccomp 2.5) instead of one comparison per rule in sequence: a
	// system call the kernel's constant-action cache does not answer then
	// runs a few comparisons instead of up to one per rule, for a slightly
	// longer program (TestFilterPathLength holds the bounds,
	// seccomp-profiles/README.md the figures). The verdicts are the same,
	// so a libseccomp older than 2.5, which has no such attribute, keeps
	// the sequential layout; a newer one that refuses it is an error.
	// (cacheFormat names this choice; the goldens embody it.)
	if err := filter.SetOptimize(2); err != nil {
		if maj, min, _ := libseccomp.GetLibraryVersion(); maj > 2 || maj == 2 && min >= 5 {
			return nil, fmt.Errorf("compile seccomp profile %s: set optimize 2: %w", p.Source, err)
		}
	}
	// The filter holds exactly one architecture: the one asked for.
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil, fmt.Errorf("compile seccomp profile %s: native architecture: %w", p.Source, err)
	}
	if arch != native {
		if err := filter.AddArch(arch); err != nil {
			return nil, fmt.Errorf("compile seccomp profile %s: add arch %s: %w", p.Source, arch, err)
		}
		if err := filter.RemoveArch(native); err != nil {
			return nil, fmt.Errorf("compile seccomp profile %s: remove arch %s: %w", p.Source, native, err)
		}
	}
	for _, r := range p.plan {
		if err := addRule(filter, arch, p.defaultAct, r); err != nil {
			return nil, fmt.Errorf("compile seccomp profile %s:%d: %s %q: %w", p.Source, r.line, r.where, r.syscall, err)
		}
	}
	raw, err := exportBPF(filter)
	if err != nil {
		return nil, fmt.Errorf("compile seccomp profile %s: export BPF: %w", p.Source, err)
	}
	if err := load.Check(raw); err != nil {
		return nil, fmt.Errorf("compile seccomp profile %s: libseccomp's %w", p.Source, err)
	}
	return &Program{Profile: p.Name, SHA256: p.SHA256, Arch: name, Raw: raw}, nil
}

// addRule adds one planned rule to filter.
func addRule(filter *libseccomp.ScmpFilter, arch libseccomp.ScmpArch, def action, r rule) error {
	// libseccomp refuses a rule that repeats the default action; it would
	// change nothing anyway.
	if r.act == def {
		return nil
	}
	// Not a syscall of this architecture ("open" on aarch64): nothing to
	// filter.
	if nr, err := libseccomp.GetSyscallFromNameByArch(r.syscall, arch); err != nil {
		return fmt.Errorf("resolve for %s: %w", arch, err)
	} else if nr < 0 {
		return nil
	}
	// Rules take the native number; libseccomp translates it for the
	// filter's architecture.
	nr, err := libseccomp.GetSyscallFromName(r.syscall)
	if err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	if len(r.conds) == 0 {
		return filter.AddRule(nr, scmpAction(r.act))
	}
	var conds []libseccomp.ScmpCondition
	for _, c := range r.conds {
		values := []uint64{c.value}
		if c.op == specs.OpMaskedEqual {
			values = append(values, c.datum)
		}
		sc, err := libseccomp.MakeCondition(c.index, scmpOps[c.op], values...)
		if err != nil {
			return fmt.Errorf("condition %s: %w", c, err)
		}
		conds = append(conds, sc)
	}
	return filter.AddRuleConditional(nr, scmpAction(r.act), conds)
}

var scmpOps = map[specs.LinuxSeccompOperator]libseccomp.ScmpCompareOp{
	specs.OpNotEqual:     libseccomp.CompareNotEqual,
	specs.OpLessThan:     libseccomp.CompareLess,
	specs.OpLessEqual:    libseccomp.CompareLessOrEqual,
	specs.OpEqualTo:      libseccomp.CompareEqual,
	specs.OpGreaterEqual: libseccomp.CompareGreaterEqual,
	specs.OpGreaterThan:  libseccomp.CompareGreater,
	specs.OpMaskedEqual:  libseccomp.CompareMaskedEqual,
}

// scmpAction converts a validated action.
func scmpAction(a action) libseccomp.ScmpAction {
	switch a.kind {
	case specs.ActAllow:
		return libseccomp.ActAllow
	case specs.ActErrno:
		return libseccomp.ActErrno.SetReturnCode(int16(a.errno))
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess
	case specs.ActTrap:
		return libseccomp.ActTrap
	case specs.ActLog:
		return libseccomp.ActLog
	}
	panic(fmt.Sprintf("seccomp: bug: unvalidated action %v", a))
}

// exportBPF writes the filter's BPF into a memfd and reads it back.
// (libseccomp 2.5 has no export to memory; 2.6's ExportBPFMem returns
// EOPNOTSUPP when built against 2.5.)
func exportBPF(filter *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("nsbox-seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:nsbox-seccomp-bpf")
	defer f.Close()
	if err := filter.ExportBPF(f); err != nil {
		return nil, fmt.Errorf("seccomp_export_bpf: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek %s: %w", f.Name(), err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return raw, nil
}
