package supervisor

import (
	"fmt"
	"os"
	"syscall"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// checkWorkspace makes sure a user-given workspace is a directory the
// sandbox user (host uid HostIDBase+SandboxID) can write, so the run fails
// up front with a fix instead of the program failing on its first write.
func checkWorkspace(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workspace %s: not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("workspace %s: cannot read owner", dir)
	}
	id := uint32(spec.HostIDBase + spec.SandboxID)
	mode := fi.Mode().Perm()
	writable := (st.Uid == id && mode&0o300 == 0o300) ||
		(st.Gid == id && mode&0o030 == 0o030) ||
		mode&0o003 == 0o003
	if !writable {
		return fmt.Errorf("workspace %s: not writable by the sandbox user (host uid %d); run `chown %d:%d %s` or leave --workspace out for a fresh one",
			dir, id, id, id, dir)
	}
	return nil
}
