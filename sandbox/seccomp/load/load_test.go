package load

import (
	"strings"
	"testing"
)

// TestCheck checks the shape rule at its edges: whole instructions, 1 to
// MaxInsns of them.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		size int
		want string // "" for accepted
	}{
		{0, "0 bytes"},
		{7, "7 bytes"},
		{8, ""},
		{12, "12 bytes"},
		{8 * MaxInsns, ""},
		{8*MaxInsns + 4, "bytes"},
		{8 * (MaxInsns + 1), "4097 instructions"},
	} {
		err := Check(make([]byte, c.size))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%d bytes): %v, want nil", c.size, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%d bytes): %v, want an error containing %q", c.size, err, c.want)
		}
	}
}
