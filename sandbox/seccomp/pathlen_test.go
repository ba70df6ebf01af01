package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// pathLen runs raw on one x86_64 call the way the kernel would and returns
// how many instructions it executed and the verdict. It knows only the
// instructions libseccomp emits (loads of seccomp_data words, jumps,
// returns, AND); anything else is a test failure, not a guess.
func pathLen(raw []byte, nr uint32, args [6]uint64) (int, uint32, error) {
	data := [16]uint32{0: nr, 1: unix.AUDIT_ARCH_X86_64}
	for i, a := range args {
		data[4+2*i], data[5+2*i] = uint32(a), uint32(a>>32)
	}
	var acc uint32
	for pc, steps := 0, 1; pc < len(raw)/8; pc, steps = pc+1, steps+1 {
		b := raw[8*pc:]
		op, jt, jf, k := binary.NativeEndian.Uint16(b), int(b[2]), int(b[3]), binary.NativeEndian.Uint32(b[4:])
		taken := false
		switch op {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = data[k/4]
			continue
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= k
			continue
		case unix.BPF_RET | unix.BPF_K:
			return steps, k, nil
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(k)
			continue
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			taken = acc == k
		case unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K:
			taken = acc > k
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			taken = acc >= k
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			taken = acc&k != 0
		default:
			return 0, 0, fmt.Errorf("instruction %d: opcode %#x not emulated", pc, op)
		}
		if taken {
			pc += jt
		} else {
			pc += jf
		}
	}
	return 0, 0, fmt.Errorf("ran off the end of the program")
}

// TestFilterPathLength checks that the default profile decides the calls
// CPython makes most in a few instructions: the binary tree that
// compileFor asks libseccomp for (SCMP_FLTATR_CTL_OPTIMIZE 2). The
// sequential layout took 100 to 370 instructions for most of these
// (newfstatat 203, ioctl TCGETS 369, an unknown number 280), and every one
// runs on each system call the kernel's constant-action cache does not
// answer.
func TestFilterPathLength(t *testing.T) {
	prog, err := mustLoad(t, "default").compileFor(libseccomp.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		nr   uint32
		args [6]uint64
		max  int
		want uint32
	}{
		{"read", unix.SYS_READ, [6]uint64{}, 24, retAllow},
		{"write", unix.SYS_WRITE, [6]uint64{}, 24, retAllow},
		// openat checks its mode for setuid and setgid bits: a few more.
		{"openat", unix.SYS_OPENAT, [6]uint64{}, 30, retAllow},
		{"newfstatat", unix.SYS_NEWFSTATAT, [6]uint64{}, 24, retAllow},
		{"futex", unix.SYS_FUTEX, [6]uint64{}, 24, retAllow},
		{"getppid", unix.SYS_GETPPID, [6]uint64{}, 24, retAllow},
		{"mount", unix.SYS_MOUNT, [6]uint64{}, 24, retEPERM},
		{"syscall 1000", 1000, [6]uint64{}, 24, retENOSYS},
		{"clone", unix.SYS_CLONE, [6]uint64{uint64(unix.SIGCHLD)}, 64, retAllow},
		{"ioctl TCGETS", unix.SYS_IOCTL, [6]uint64{0, unix.TCGETS}, 128, retAllow},
	} {
		steps, ret, err := pathLen(prog.Raw, c.nr, c.args)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ret != c.want {
			t.Errorf("%s: %s, want %s", c.name, retString(ret), retString(c.want))
		}
		if steps > c.max {
			t.Errorf("%s: decided after %d instructions, want at most %d", c.name, steps, c.max)
		}
	}
}
