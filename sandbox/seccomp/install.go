package seccomp

import (
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// decodeBPF splits raw into struct sock_filter instructions (load.Decode).
func decodeBPF(raw []byte) ([]unix.SockFilter, error) { return load.Decode(raw) }
