package job

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseLabels(t *testing.T) {
	long := strings.Repeat("k", 64)
	for _, tc := range []struct {
		flags []string
		bad   string // part of the error; "" for accepted
	}{
		{[]string{"job=1", "a.b-c_D9=x=y", long + "=v", "empty="}, ""},
		{[]string{"noequals"}, "want key=value"},
		{[]string{"=v"}, "1-64 characters"},
		{[]string{long + "k=v"}, "1-64 characters"},
		{[]string{"sp ace=v"}, "1-64 characters"},
		{[]string{"caf\u00e9=v"}, "1-64 characters"},
		{[]string{"a/b=v"}, "1-64 characters"},
		{[]string{"k=" + strings.Repeat("v", 1025)}, "longer than 1024"},
		{[]string{"k=1", "k=2"}, "given twice"},
		{[]string{"k=caf\xe9"}, "not valid UTF-8"},
		{manyLabels(33), "at most 32 labels"},
	} {
		got, err := ParseLabels(tc.flags)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%q: %v", tc.flags, err)
		case tc.bad == "" && (got["a.b-c_D9"] != "x=y" || got[long] != "v" || got["empty"] != ""):
			t.Errorf("%q: got %v", tc.flags, got)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%q: error %v, want %q", tc.flags, err, tc.bad)
		}
	}
}

// manyLabels returns n distinct --label values.
func manyLabels(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("k%d=v", i))
	}
	return out
}
