package seccomp

import "testing"

// BenchmarkCompile measures what the supervisor pays per sandbox to turn a
// loaded profile into BPF.
func BenchmarkCompile(b *testing.B) {
	for _, name := range []string{"default", "strict"} {
		b.Run(name, func(b *testing.B) {
			p := mustLoad(b, name)
			for b.Loop() {
				if _, err := p.Compile(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad measures parsing and validating a built-in profile
// (including one libseccomp name lookup per syscall).
func BenchmarkLoad(b *testing.B) {
	for _, name := range []string{"default", "strict"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				mustLoad(b, name)
			}
		})
	}
}
