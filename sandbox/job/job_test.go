package job

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/plan"
)

func TestCheckLabels(t *testing.T) {
	many := map[string]string{}
	for i := range 33 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		labels map[string]string
		bad    string
	}{
		{nil, ""},
		{map[string]string{"job": "1", "a.b-c_D9": "x=y", "empty": ""}, ""},
		{map[string]string{"": "v"}, "1-64 characters"},
		{map[string]string{"sp ace": "v"}, "1-64 characters"},
		{map[string]string{"k": strings.Repeat("v", 1025)}, "longer than 1024"},
		{map[string]string{"k": "caf\xe9"}, "not valid UTF-8"},
		{many, "at most 32 labels"},
	} {
		err := CheckLabels(tc.labels)
		if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%v: %v, want %q", tc.labels, err, tc.bad)
		}
	}
}

func TestProgramAndFilesBounded(t *testing.T) {
	pl := &plan.Plan{ProgramSize: 10, Timeout: time.Second, Workspace: plan.Workspace{Size: 8, Inodes: 2}}
	for _, tc := range []struct {
		code []byte
		bad  string
	}{
		{[]byte("print(1)"), ""},
		{[]byte("0123456789"), ""},
		{[]byte("01234567890"), "larger than"},
		{nil, "empty"},
	} {
		_, err := program(&Request{Code: tc.code}, pl)
		if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("program %q: %v, want %q", tc.code, err, tc.bad)
		}
	}
	for _, tc := range []struct {
		files []File
		bad   string
	}{
		{[]File{{Path: "a", Data: []byte("1234")}, {Path: "b", Data: []byte("5678"), Mode: 0o755}}, ""},
		{[]File{{Path: "a", Data: []byte("123456789")}}, "workspace_size"},
		{[]File{{Path: "a"}, {Path: "b"}, {Path: "c"}}, "workspace_inodes"},
		{[]File{{Path: "a", Mode: 0o4755}}, "permission bits"},
	} {
		err := checkFiles(tc.files, pl)
		if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("files %v: %v, want %q", tc.files, err, tc.bad)
		}
	}
	// Standard input: up to MaxStdin, whatever the plan; past it refused
	// with its size and the limit, and a stream's reader gets the limit.
	if b, err := input(&Request{Stdin: make([]byte, MaxStdin)}, pl); err != nil || len(b) != MaxStdin {
		t.Errorf("input of MaxStdin bytes: %d, %v", len(b), err)
	}
	_, err := input(&Request{Stdin: make([]byte, MaxStdin+1)}, pl)
	if want := fmt.Sprintf("is %d bytes, more than 64MiB", MaxStdin+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("input over MaxStdin: %v, want %q", err, want)
	}
	var asked int64
	input(&Request{ReadStdin: func(size int64, _ time.Duration) ([]byte, error) { asked = size; return nil, nil }}, pl)
	if asked != MaxStdin {
		t.Errorf("ReadStdin asked for %d bytes at most, want %d", asked, MaxStdin)
	}
}
