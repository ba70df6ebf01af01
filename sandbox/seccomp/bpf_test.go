package seccomp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Filter return values (SECCOMP_RET_*), as the kernel reads them.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

func retString(r uint32) string {
	switch {
	case r == retAllow:
		return "ALLOW"
	case r == retKill:
		return "KILL_PROCESS"
	case r&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return fmt.Sprintf("ERRNO(%d)", r&unix.SECCOMP_RET_DATA)
	}
	return fmt.Sprintf("%#x", r)
}

// filterVM runs a compiled program in user space, the way the kernel would.
type filterVM struct {
	vm    *bpf.VM
	arch  libseccomp.ScmpArch
	audit uint32 // AUDIT_ARCH_* of arch
}

func newFilterVM(t *testing.T, raw []byte, arch libseccomp.ScmpArch) *filterVM {
	t.Helper()
	ins := make([]bpf.RawInstruction, len(raw)/8)
	for i := range ins {
		b := raw[8*i:]
		ins[i] = bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	prog, all := bpf.Disassemble(ins)
	if !all {
		t.Fatalf("x/net/bpf could not decode every instruction of the %d-instruction program", len(ins))
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v", err)
	}
	audit := map[libseccomp.ScmpArch]uint32{libseccomp.ArchAMD64: unix.AUDIT_ARCH_X86_64, libseccomp.ArchARM64: unix.AUDIT_ARCH_AARCH64}[arch]
	if audit == 0 {
		t.Fatalf("no AUDIT_ARCH for %s", arch)
	}
	return &filterVM{vm: vm, arch: arch, audit: audit}
}

// run feeds one struct seccomp_data to the filter: nr, arch,
// instruction_pointer, args[6]. The kernel loads its 32-bit words in native
// (little-endian) order and x/net/bpf loads big-endian, so each word is
// written big-endian at the kernel's offset: a u64 argument's low word
// first, as a little-endian machine stores it.
func (f *filterVM) run(t *testing.T, nr int32, audit uint32, args [6]uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	be := binary.BigEndian
	be.PutUint32(data[0:], uint32(nr))
	be.PutUint32(data[4:], audit)
	be.PutUint32(data[8:], 0x1000) // instruction_pointer, low word
	for i, a := range args {
		be.PutUint32(data[16+8*i:], uint32(a))
		be.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	ret, err := f.vm.Run(data)
	if err != nil {
		t.Fatalf("run filter: %v", err)
	}
	return uint32(ret)
}

// nr resolves a syscall for the VM's architecture.
func (f *filterVM) nr(t *testing.T, name string) int32 {
	t.Helper()
	nr, err := libseccomp.GetSyscallFromNameByArch(name, f.arch)
	if err != nil || nr < 0 {
		t.Fatalf("resolve %s on %s: %d, %v", name, f.arch, nr, err)
	}
	return int32(nr)
}

// Linux constants the table needs, spelled out so the expectations can be
// read without a header at hand.
const (
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000
	// What glibc's pthread_create passes (the clone3 fallback).
	cloneThread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
		unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	// What glibc's fork passes.
	cloneFork = unix.CLONE_CHILD_CLEARTID | unix.CLONE_CHILD_SETTID | uint64(unix.SIGCHLD)

	tiocsti     = 0x5412
	tioclinux   = 0x541C
	fionread    = 0x541B
	tcgets      = 0x5401
	siocgifconf = 0x8912

	addrNoRandomize = 0x0040000
	perLinux32      = 0x0008
	highBit         = 1 << 32
	atFDCWD         = 0xffffff9c // AT_FDCWD (-100) as the kernel passes it: a 32-bit int
)

// vmCase is one syscall and the verdict each profile must give it.
type vmCase struct {
	name    string
	syscall string
	args    [6]uint64
	def     uint32 // under default.json
	strict  uint32 // under strict.json
	// loopback, proxy: the loopback variants (LoopbackSuffix), the proxy
	// variants (ProxySuffix) allow it, whatever the profile says.
	loopback, proxy bool
}

func denied(name string) vmCase {
	return vmCase{name, name, [6]uint64{}, retEPERM, retEPERM, false, false}
}

func vmCases() []vmCase {
	var cases []vmCase
	for _, name := range []string{
		"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "move_mount", "open_tree",
		"unshare", "setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load",
		"init_module", "finit_module", "delete_module", "ptrace", "process_vm_readv", "process_vm_writev",
		"open_by_handle_at", "name_to_handle_at", "reboot", "swapon", "swapoff", "acct",
		"clock_settime", "clock_adjtime", "settimeofday", "adjtimex", "sethostname", "setdomainname",
	} {
		cases = append(cases, denied(name))
	}
	for _, ns := range []uint64{cloneNewNS, cloneNewCgroup, cloneNewUTS, cloneNewIPC, cloneNewUser, cloneNewPID, cloneNewNet} {
		cases = append(cases,
			vmCase{fmt.Sprintf("clone %#x", ns), "clone", [6]uint64{ns}, retEPERM, retEPERM, false, false},
			vmCase{fmt.Sprintf("clone thread|%#x", ns), "clone", [6]uint64{cloneThread | ns}, retEPERM, retEPERM, false, false},
			vmCase{fmt.Sprintf("clone fork|%#x|high bits", ns), "clone", [6]uint64{cloneFork | ns | highBit}, retEPERM, retEPERM, false, false},
		)
	}
	return append(cases,
		vmCase{"read", "read", [6]uint64{}, retAllow, retAllow, false, false},
		vmCase{"write", "write", [6]uint64{1}, retAllow, retAllow, false, false},
		vmCase{"exit_group", "exit_group", [6]uint64{}, retAllow, retAllow, false, false},
		vmCase{"futex", "futex", [6]uint64{}, retAllow, retAllow, false, false},
		vmCase{"execve", "execve", [6]uint64{}, retAllow, retAllow, false, false},
		// No file in memory to execute, whatever the flags: MFD_CLOEXEC,
		// MFD_NOEXEC_SEAL (8), MFD_EXEC (0x10).
		vmCase{"memfd_create 0", "memfd_create", [6]uint64{0, 0}, retEPERM, retEPERM, false, false},
		vmCase{"memfd_create CLOEXEC", "memfd_create", [6]uint64{0, unix.MFD_CLOEXEC}, retEPERM, retEPERM, false, false},
		vmCase{"memfd_create NOEXEC_SEAL", "memfd_create", [6]uint64{0, 8}, retEPERM, retEPERM, false, false},
		vmCase{"memfd_create EXEC", "memfd_create", [6]uint64{0, 0x10}, retEPERM, retEPERM, false, false},
		// No setuid or setgid bit, set or created; other modes pass. (The
		// calls without "at", x86_64 only, have the same rules.)
		vmCase{"fchmod 06755", "fchmod", [6]uint64{3, 0o6755}, retEPERM, retEPERM, false, false},
		vmCase{"fchmod 01777", "fchmod", [6]uint64{3, 0o1777}, retAllow, retAllow, false, false},
		vmCase{"fchmodat 04755", "fchmodat", [6]uint64{atFDCWD, 0, 0o4755}, retEPERM, retEPERM, false, false},
		vmCase{"fchmodat 0644", "fchmodat", [6]uint64{atFDCWD, 0, 0o644}, retAllow, retAllow, false, false},
		vmCase{"openat O_CREAT 02777", "openat", [6]uint64{atFDCWD, 0, unix.O_CREAT | unix.O_WRONLY, 0o2777}, retEPERM, retEPERM, false, false},
		vmCase{"openat O_CREAT 0777", "openat", [6]uint64{atFDCWD, 0, unix.O_CREAT | unix.O_WRONLY, 0o777}, retAllow, retAllow, false, false},
		vmCase{"mknodat S_IFREG|04755", "mknodat", [6]uint64{atFDCWD, 0, unix.S_IFREG | 0o4755}, retEPERM, retENOSYS, false, false},
		// Not in the allowlists: the default, ENOSYS.
		vmCase{"syslog", "syslog", [6]uint64{10}, retENOSYS, retENOSYS, false, false},
		vmCase{"clone3", "clone3", [6]uint64{}, retENOSYS, retENOSYS, false, false},
		vmCase{"clone thread", "clone", [6]uint64{cloneThread}, retAllow, retAllow, false, false},
		vmCase{"clone fork", "clone", [6]uint64{cloneFork}, retAllow, retEPERM, false, false},
		vmCase{"clone 0", "clone", [6]uint64{}, retAllow, retEPERM, false, false},
		// What glibc's posix_spawn passes: a process all the same.
		vmCase{"clone vfork", "clone", [6]uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, retAllow, retEPERM, false, false},
		vmCase{"clone thread|high bits", "clone", [6]uint64{cloneThread | highBit}, retAllow, retAllow, false, false},
		// x86_64 only (arm64 has neither): see TestFilterVerdicts.
		vmCase{"fork", "fork", [6]uint64{}, retAllow, retEPERM, false, false},
		vmCase{"vfork", "vfork", [6]uint64{}, retAllow, retEPERM, false, false},
		vmCase{"socket AF_UNIX", "socket", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, retAllow, retAllow, false, false},
		vmCase{"socket AF_INET", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, retEPERM, retEPERM, true, true},
		vmCase{"socket AF_INET6", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_DGRAM}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET|high bits", "socket", [6]uint64{unix.AF_INET | highBit, unix.SOCK_STREAM}, retEPERM, retEPERM, true, true},
		// The proxy variants: TCP only. The type is compared on
		// SOCK_TYPE_MASK (0xf), so the flags pass; the protocol is 0 or
		// IPPROTO_TCP on its low 32 bits.
		vmCase{"socket AF_INET STREAM|CLOEXEC", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, retEPERM, retEPERM, true, true},
		vmCase{"socket AF_INET STREAM|NONBLOCK|CLOEXEC TCP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP}, retEPERM, retEPERM, true, true},
		vmCase{"socket AF_INET6 STREAM", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_STREAM}, retEPERM, retEPERM, true, true},
		vmCase{"socket AF_INET6 STREAM TCP|high bits", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_STREAM | highBit, unix.IPPROTO_TCP | highBit}, retEPERM, retEPERM, true, true},
		vmCase{"socket AF_INET DGRAM", "socket", [6]uint64{unix.AF_INET, unix.SOCK_DGRAM}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET DGRAM|CLOEXEC", "socket", [6]uint64{unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET RAW", "socket", [6]uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_TCP}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET6 RAW", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_RAW}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET SEQPACKET", "socket", [6]uint64{unix.AF_INET, unix.SOCK_SEQPACKET}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET STREAM SCTP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_INET6 STREAM MPTCP", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_MPTCP}, retEPERM, retEPERM, true, false},
		vmCase{"socket AF_UNIX STREAM TCP", "socket", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM, unix.IPPROTO_TCP}, retAllow, retAllow, false, false},
		vmCase{"socket AF_NETLINK STREAM", "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_STREAM}, retEPERM, retEPERM, false, false},
		vmCase{"socket AF_UNSPEC", "socket", [6]uint64{unix.AF_UNSPEC}, retEPERM, retEPERM, false, false},
		vmCase{"socket AF_NETLINK", "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW}, retEPERM, retEPERM, false, false},
		vmCase{"socket AF_PACKET", "socket", [6]uint64{unix.AF_PACKET, unix.SOCK_RAW}, retEPERM, retEPERM, false, false},
		vmCase{"socket AF_VSOCK", "socket", [6]uint64{unix.AF_VSOCK}, retEPERM, retEPERM, false, false},
		vmCase{"socket AF_ALG", "socket", [6]uint64{unix.AF_ALG}, retEPERM, retEPERM, false, false},
		vmCase{"socket AF_NETLINK|high bits", "socket", [6]uint64{unix.AF_NETLINK | highBit}, retEPERM, retEPERM, false, false},
		vmCase{"socket -1", "socket", [6]uint64{^uint64(0)}, retEPERM, retEPERM, false, false},
		vmCase{"socketpair AF_UNIX", "socketpair", [6]uint64{unix.AF_UNIX}, retAllow, retAllow, false, false},
		vmCase{"socketpair AF_INET", "socketpair", [6]uint64{unix.AF_INET}, retEPERM, retEPERM, false, false},
		vmCase{"socketpair AF_INET STREAM", "socketpair", [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, retEPERM, retEPERM, false, false},
		vmCase{"ioctl TIOCSTI", "ioctl", [6]uint64{0, tiocsti}, retEPERM, retEPERM, false, false},
		vmCase{"ioctl TIOCSTI|high bits", "ioctl", [6]uint64{0, tiocsti | highBit}, retEPERM, retEPERM, false, false},
		vmCase{"ioctl TIOCSTI|all high bits", "ioctl", [6]uint64{0, tiocsti | 0xffffffff00000000}, retEPERM, retEPERM, false, false},
		vmCase{"ioctl TIOCLINUX", "ioctl", [6]uint64{0, tioclinux}, retEPERM, retEPERM, false, false},
		vmCase{"ioctl TIOCLINUX|high bits", "ioctl", [6]uint64{0, tioclinux | highBit}, retEPERM, retEPERM, false, false},
		vmCase{"ioctl FIONREAD", "ioctl", [6]uint64{0, fionread}, retAllow, retAllow, false, false},
		vmCase{"ioctl TCGETS", "ioctl", [6]uint64{0, tcgets}, retAllow, retAllow, false, false},
		vmCase{"ioctl SIOCGIFCONF", "ioctl", [6]uint64{0, siocgifconf}, retAllow, retEPERM, false, false},
		vmCase{"personality 0", "personality", [6]uint64{0}, retAllow, retAllow, false, false},
		vmCase{"personality query", "personality", [6]uint64{0xffffffff}, retAllow, retAllow, false, false},
		vmCase{"personality ADDR_NO_RANDOMIZE", "personality", [6]uint64{addrNoRandomize}, retEPERM, retEPERM, false, false},
		vmCase{"personality PER_LINUX32", "personality", [6]uint64{perLinux32}, retEPERM, retEPERM, false, false},
		vmCase{"personality ADDR_NO_RANDOMIZE|high bits", "personality", [6]uint64{addrNoRandomize | highBit}, retEPERM, retEPERM, false, false},
	)
}

// vmArches are the architectures both profiles list; each is compiled and
// checked here whatever machine runs the test.
var vmArches = []libseccomp.ScmpArch{libseccomp.ArchAMD64, libseccomp.ArchARM64}

// TestFilterVerdicts compiles each built-in filter (each profile and its
// variants) for each architecture and checks the verdict of every case in
// a user-space BPF VM. A +noproc variant gives the process syscalls the
// strict profile's verdicts.
func TestFilterVerdicts(t *testing.T) {
	for _, profile := range Builtins() {
		p := mustLoad(t, profile)
		from, noproc := noProcOf(profile)
		if !noproc {
			from = profile
		}
		base, suffix, ok := variantOf(from)
		if !ok {
			base = from
		}
		for _, arch := range vmArches {
			t.Run(profile+"/"+arch.String(), func(t *testing.T) {
				prog, err := p.compileFor(arch)
				if err != nil {
					t.Fatal(err)
				}
				f := newFilterVM(t, prog.Raw, arch)
				for _, c := range vmCases() {
					if (c.syscall == "fork" || c.syscall == "vfork") && arch == libseccomp.ArchARM64 {
						continue
					}
					want := c.def
					if base == "strict" || noproc && slices.Contains(noProcSyscalls, c.syscall) {
						want = c.strict
					}
					if suffix == LoopbackSuffix && c.loopback || suffix == ProxySuffix && c.proxy {
						want = retAllow
					}
					if got := f.run(t, f.nr(t, c.syscall), f.audit, c.args); got != want {
						t.Errorf("%s%v: %s, want %s", c.name, c.args[:3], retString(got), retString(want))
					}
				}
				// A number no architecture has yet.
				if got := f.run(t, 1000, f.audit, [6]uint64{}); got != retENOSYS {
					t.Errorf("syscall 1000: %s, want ENOSYS", retString(got))
				}
			})
		}
	}
}

// TestFilterOtherABIs checks that calls through another ABI never reach the
// rules: the i386 ABI (int 0x80 on x86_64, whose numbers differ: 21 is
// mount there) and x32 (x86_64's arch with bit 30 set in nr).
func TestFilterOtherABIs(t *testing.T) {
	for _, profile := range Builtins() {
		t.Run(profile, func(t *testing.T) {
			prog, err := mustLoad(t, profile).compileFor(libseccomp.ArchAMD64)
			if err != nil {
				t.Fatal(err)
			}
			f := newFilterVM(t, prog.Raw, libseccomp.ArchAMD64)
			const x32 = 0x40000000
			for _, c := range []struct {
				name  string
				nr    int32
				audit uint32
			}{
				{"i386 read", 3, unix.AUDIT_ARCH_I386},
				{"i386 mount", 21, unix.AUDIT_ARCH_I386},
				{"aarch64 read", 63, unix.AUDIT_ARCH_AARCH64},
				{"x32 read", x32 | 0, unix.AUDIT_ARCH_X86_64},
				{"x32 mount", x32 | 165, unix.AUDIT_ARCH_X86_64},
				{"x32 recvmsg", x32 | 519, unix.AUDIT_ARCH_X86_64},
			} {
				if got := f.run(t, c.nr, c.audit, [6]uint64{}); got != retKill {
					t.Errorf("%s (nr %#x, arch %#x): %s, want KILL_PROCESS", c.name, c.nr, c.audit, retString(got))
				}
			}
		})
	}
}
