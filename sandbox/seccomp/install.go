package seccomp

import (
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// Install loads raw (a Program's Raw) as a seccomp filter on the calling
// thread; see load.Install, which the init calls directly.
func Install(raw []byte) error { return load.Install(raw) }

// decodeBPF splits raw into struct sock_filter instructions (load.Decode).
func decodeBPF(raw []byte) ([]unix.SockFilter, error) { return load.Decode(raw) }
