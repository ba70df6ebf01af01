package seccomp

import (
	"testing"

	seccompprofiles "github.com/nsbox/nsbox/seccomp-profiles"
)

// FuzzParse feeds arbitrary bytes to the profile parser: it must return a
// profile or an error, never panic.
//
//	go test ./sandbox/seccomp/ -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	for _, name := range seccompprofiles.Names() {
		data, err := seccompprofiles.Read(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(withRule(`{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW"}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parse("fuzz", "fuzz.json", data)
		if err == nil && p.SHA256 == "" {
			t.Fatal("profile without SHA256")
		}
	})
}
