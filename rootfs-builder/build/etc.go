package build

import (
	"fmt"
	"os"
)

// etcFiles are the root's /etc: enough for getpwuid(), getgrgid(),
// gethostname() and resolving localhost from files, and nothing of the
// host's. glibc 2.34+ has the "files" NSS backend built in, so no
// libnss_*.so is needed. The shells are /usr/sbin/nologin, which does not
// exist in the root.
var etcFiles = []struct{ name, content string }{
	{"passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"sandbox:x:1000:1000:sandbox:/workspace:/usr/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{"group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"},
	{"hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	{"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n" +
		"protocols: files\nservices: files\nethers: files\nrpc: files\n"},
	{"hostname", "nsbox\n"},
}

// mountPoints are the empty directories the sandbox mounts on: /dev and
// /proc (fresh instances), /tmp (a tmpfs) and /workspace (the run's
// writable directory). On a read-only root they cannot be created later.
var mountPoints = []string{"/dev", "/proc", "/tmp", "/workspace"}

// writeEtc writes /etc and creates the mount points.
func (b *builder) writeEtc() error {
	if err := os.MkdirAll(b.inRoot("/etc"), 0o755); err != nil {
		return fmt.Errorf("write /etc: %w", err)
	}
	for _, f := range etcFiles {
		if err := os.WriteFile(b.inRoot("/etc/"+f.name), []byte(f.content), 0o644); err != nil {
			return fmt.Errorf("write /etc: %w", err)
		}
	}
	for _, d := range mountPoints {
		if err := os.Mkdir(b.inRoot(d), 0o755); err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
	}
	return nil
}
