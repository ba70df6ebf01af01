package tests

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestTmpSizeLimited fills /tmp (strict: 16 MiB) with at most 32 MiB, in
// 4 MiB files (below RLIMIT_FSIZE): the write fails with ENOSPC inside,
// and nothing of it reaches the host (the tmpfs lives and dies with the
// sandbox's mount namespace).
func TestTmpSizeLimited(t *testing.T) {
	needRoot(t)
	code := `
import errno
written = 0
try:
    for i in range(32):
        with open("/tmp/fill%d" % (i // 4), "ab") as f:
            f.write(b"\0" * (1 << 20))
            f.flush()
        written += 1
    print("NOLIMIT", written)
except OSError as e:
    print("FULL", errno.errorcode[e.errno], written)
`
	o := runPy(t, "strict", code)
	o.wantStatus(t, result.StatusOK)
	if !strings.HasPrefix(o.res.Stdout, "FULL ENOSPC 1") { // 15 or 16 MiB fit
		t.Errorf("want ENOSPC after about 16 MiB: %s", o.res.Stdout)
	}
}

// TestOwnHostnameAndIPC: the UTS namespace has its own name that the
// program cannot change, and a SysV shared memory segment the test makes
// on the host is not visible in the sandbox's IPC namespace.
func TestOwnHostnameAndIPC(t *testing.T) {
	needRoot(t)
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Fatalf("create host shm canary: %v", err)
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	code := `
import socket, os
print("HOST", socket.gethostname())
try:
    socket.sethostname("escaped")
    print("SET ok")
except OSError as e:
    print("SET", e.errno)
print("SHM", open("/proc/sysvipc/shm").read().count("\n") - 1)
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	for _, want := range []string{"HOST nsbox", "SET 1", "SHM 0"} { // 1 = EPERM
		if !strings.Contains(o.res.Stdout, want) {
			t.Errorf("want %q in:\n%s", want, o.res.Stdout)
		}
	}
}
