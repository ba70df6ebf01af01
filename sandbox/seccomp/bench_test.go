package seccomp

import (
	"os"
	"testing"
)

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

// BenchmarkCompileCached measures the same through a Cache: "hit" is every
// run after the first on a host (read and verify one entry), "miss" a run
// whose entry is missing (compile, then write and rename the entry).
func BenchmarkCompileCached(b *testing.B) {
	for _, name := range []string{"default", "strict"} {
		b.Run(name+"/hit", func(b *testing.B) {
			p := mustLoad(b, name)
			c := Cache{Dir: b.TempDir()}
			if _, err := c.Compile(p); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.Compile(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/miss", func(b *testing.B) {
			p := mustLoad(b, name)
			c := Cache{Dir: b.TempDir()}
			for b.Loop() {
				if _, err := c.Compile(p); err != nil {
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

// BenchmarkCacheLoad measures what a run pays for its filter when the
// cache has it: "bytes" is Cache.Load answered by the profile's bytes
// (read, hash, one entry), "plan" the path it replaces, Load (parse and
// plan) then Compile answered by the plan-keyed entry.
func BenchmarkCacheLoad(b *testing.B) {
	for _, name := range []string{"default", "strict"} {
		b.Run(name+"/bytes", func(b *testing.B) {
			c := Cache{Dir: b.TempDir()}
			if _, err := c.Load(name); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.Load(name); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/plan", func(b *testing.B) {
			c := Cache{Dir: b.TempDir()}
			if _, err := c.Compile(mustLoad(b, name)); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.Compile(mustLoad(b, name)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
