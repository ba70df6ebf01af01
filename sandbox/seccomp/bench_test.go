package seccomp

import (
	"os"
	"testing"
)

// BenchmarkCompile measures what it costs to turn a loaded profile into
// BPF with libseccomp: what the goldens save a run with a built-in
// profile, and what a user's profile costs without the cache.
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

// BenchmarkCompileCached measures the same through the plan-keyed cache:
// "hit" reads and verifies one entry, "miss" compiles, then writes and
// renames the entry.
func BenchmarkCompileCached(b *testing.B) {
	for _, name := range []string{"default", "strict"} {
		b.Run(name+"/hit", func(b *testing.B) {
			p := mustLoad(b, name)
			c := fileCache{dir: b.TempDir()}
			if _, _, err := c.compile(p); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, _, err := c.compile(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/miss", func(b *testing.B) {
			p := mustLoad(b, name)
			c := fileCache{dir: b.TempDir()}
			for b.Loop() {
				if _, _, err := c.compile(p); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.Remove(c.path(p.cacheKey())); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
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

// BenchmarkLoadFilter measures what a run pays for its filter: "builtin"
// is a built-in profile's golden (hash the embedded JSON, check the
// bytes), "file/cached" a copy of it as a user's profile answered by the
// cache (read, hash, one entry), "file/compiled" the same without a cache
// (parse, plan, compile).
func BenchmarkLoadFilter(b *testing.B) {
	for _, name := range []string{"default", "strict"} {
		path := copyBuiltin(b, name)
		cacheDir := b.TempDir()
		for _, c := range []struct{ sub, profile, cacheDir string }{
			{"builtin", name, ""},
			{"file/cached", path, cacheDir},
			{"file/compiled", path, ""},
		} {
			b.Run(name+"/"+c.sub, func(b *testing.B) {
				if _, err := LoadFilter(c.profile, c.cacheDir); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := LoadFilter(c.profile, c.cacheDir); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
