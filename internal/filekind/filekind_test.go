package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for mode, want := range map[fs.FileMode]string{
		fs.ModeDevice | fs.ModeCharDevice: "a device",
		fs.ModeNamedPipe:                  "a FIFO",
		fs.ModeSocket:                     "a socket",
		fs.ModeDir | 0o755:                "a directory",
		fs.ModeSymlink:                    "not a regular file",
	} {
		if got := Of(mode); got != want {
			t.Errorf("Of(%v) = %q, want %q", mode, got, want)
		}
	}
}
