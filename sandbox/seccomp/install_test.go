package seccomp

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// TestInstallRejectsBadPrograms checks the checks made before the syscall:
// nothing here reaches the kernel.
func TestInstallRejectsBadPrograms(t *testing.T) {
	for _, c := range []struct {
		raw  []byte
		want string
	}{
		{nil, "0 bytes"},
		{make([]byte, 7), "7 bytes"},
		{make([]byte, 8*(load.MaxInsns+1)), "4097 instructions"},
	} {
		if err := load.Install(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("load.Install(%d bytes): %v, want an error containing %q", len(c.raw), err, c.want)
		}
	}
}

// TestDecodeBPF checks the native-endian split of struct sock_filter.
func TestDecodeBPF(t *testing.T) {
	prog, err := Load("default")
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := prog.Compile()
	if err != nil {
		t.Fatal(err)
	}
	ins, err := decodeBPF(compiled.Raw)
	if err != nil {
		t.Fatal(err)
	}
	// libseccomp starts by loading seccomp_data.arch (offset 4):
	// BPF_LD|BPF_W|BPF_ABS.
	if ins[0].Code != 0x20 || ins[0].K != 4 {
		t.Errorf("first instruction %+v, want ld [4] (the arch)", ins[0])
	}
}

// TestSupported runs the probe this kernel must pass.
func TestSupported(t *testing.T) {
	ok, why := Supported()
	t.Logf("Supported() = %v, %q", ok, why)
	if !ok && mustWork() {
		t.Fatalf("seccomp not supported (NSBOX_MUST_WORK=1): %s", why)
	}
	if why == "" {
		t.Error("empty reason")
	}
}
