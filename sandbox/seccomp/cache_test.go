package seccomp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// compileFresh is what the cache must reproduce byte for byte.
func compileFresh(t testing.TB, p *Profile) []byte {
	t.Helper()
	prog, err := p.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return prog.Raw
}

// mustCacheCompile compiles through c and checks the outcome and the bytes.
func mustCacheCompile(t *testing.T, c fileCache, p *Profile, want cacheOutcome, fresh []byte) {
	t.Helper()
	prog, got, err := c.compile(p)
	if err != nil {
		t.Fatalf("fileCache.compile: %v", err)
	}
	if got != want {
		t.Errorf("fileCache.compile: outcome %d, want %d", got, want)
	}
	if !bytes.Equal(prog.Raw, fresh) {
		t.Errorf("fileCache.compile: %d bytes differ from a fresh compile's %d", len(prog.Raw), len(fresh))
	}
	if prog.Profile != p.Name || prog.SHA256 != p.SHA256 || prog.Arch == "" {
		t.Errorf("fileCache.compile: program %q %s %q, want the profile's name and hash", prog.Profile, prog.SHA256, prog.Arch)
	}
}

// TestCacheHit checks that an entry is stored with private modes and that
// a hit returns exactly the bytes a fresh compile does.
func TestCacheHit(t *testing.T) {
	for _, name := range []string{"default", "strict"} {
		t.Run(name, func(t *testing.T) {
			p := mustLoad(t, name)
			fresh := compileFresh(t, p)
			c := fileCache{dir: filepath.Join(t.TempDir(), "cache", "seccomp")}
			mustCacheCompile(t, c, p, cacheStored, fresh)
			mustCacheCompile(t, c, p, cacheHit, fresh)
			// A second Load of the same profile is the next run.
			mustCacheCompile(t, c, mustLoad(t, name), cacheHit, fresh)

			if st, err := os.Stat(c.dir); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("cache dir %s: %v, %v; want mode 0700", c.dir, st.Mode(), err)
			}
			entries, _ := os.ReadDir(c.dir)
			if len(entries) != 1 {
				t.Fatalf("cache dir holds %v, want one entry", entries)
			}
			st, err := os.Stat(c.path(p.cacheKey()))
			if err != nil || st.Mode().Perm() != 0o600 || st.Size() != int64(entryHeader+len(fresh)) {
				t.Errorf("cache entry: %v, %v; want mode 0600 and %d bytes", st, err, entryHeader+len(fresh))
			}
		})
	}
}

// TestCacheBadEntry checks that each kind of damaged entry is ignored,
// never trusted or reported, and replaced by a good one.
func TestCacheBadEntry(t *testing.T) {
	p := mustLoad(t, "default")
	fresh := compileFresh(t, p)
	key := p.cacheKey()
	good := encodeEntry(key, fresh)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	var otherKey [32]byte
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", good[:entryHeader]},
		{"torn mid-instruction", good[:len(good)-3]},
		{"one instruction short", good[:len(good)-8]},
		{"extra instruction", append(bytes.Clone(good), make([]byte, 8)...)},
		{"over 4096 instructions", append(bytes.Clone(good[:entryHeader]), make([]byte, 8*(load.MaxInsns+1))...)},
		{"bad magic", flip(0)},
		{"other format", flip(8)},
		{"bad count", flip(12)},
		{"other key", flip(16)},
		{"bad checksum", flip(entryHeader - 1)},
		{"corrupt instruction", flip(entryHeader + 12)},
		{"another key's entry", encodeEntry(otherKey, fresh)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache := fileCache{dir: t.TempDir()}
			if err := os.WriteFile(cache.path(key), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			mustCacheCompile(t, cache, p, cacheStored, fresh)
			if got, err := os.ReadFile(cache.path(key)); err != nil || !bytes.Equal(got, good) {
				t.Errorf("entry after the rewrite: %d bytes, %v; want the good entry", len(got), err)
			}
			mustCacheCompile(t, cache, p, cacheHit, fresh)
		})
	}

	// Not a regular file: a link (even to a good entry) and a directory.
	t.Run("symlink", func(t *testing.T) {
		cache := fileCache{dir: t.TempDir()}
		target := filepath.Join(t.TempDir(), "good.bpf")
		if err := os.WriteFile(target, good, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, cache.path(key)); err != nil {
			t.Fatal(err)
		}
		mustCacheCompile(t, cache, p, cacheStored, fresh)
		mustCacheCompile(t, cache, p, cacheHit, fresh)
	})
	t.Run("other owner", func(t *testing.T) {
		cache := fileCache{dir: t.TempDir()}
		if err := os.WriteFile(cache.path(key), good, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(cache.path(key), os.Geteuid()+1000, -1); err != nil {
			t.Skipf("chown: %v (not root?)", err)
		}
		mustCacheCompile(t, cache, p, cacheStored, fresh)
		mustCacheCompile(t, cache, p, cacheHit, fresh)
	})
	t.Run("directory", func(t *testing.T) {
		cache := fileCache{dir: t.TempDir()}
		if err := os.Mkdir(cache.path(key), 0o700); err != nil {
			t.Fatal(err)
		}
		// The rename cannot replace a directory: compiled every time.
		mustCacheCompile(t, cache, p, cacheNoStore, fresh)
	})
}

// TestCacheKey checks that whatever changes the compiled rules changes the
// key, and that layout and comments do not.
func TestCacheKey(t *testing.T) {
	load := func(text string) *Profile {
		path := filepath.Join(t.TempDir(), "p.json")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, path)
	}
	base := withRule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1, "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]}`)
	key := load(base).cacheKey()
	same := map[string]string{
		"whitespace": strings.ReplaceAll(base, "\t", "  "),
		"comment":    strings.Replace(base, `"defaultAction"`, `"comment": "hello", "defaultAction"`, 1),
	}
	for name, text := range same {
		if load(text).cacheKey() != key {
			t.Errorf("%s: key changed", name)
		}
	}
	differ := map[string]string{
		"errno":           strings.Replace(base, `"errnoRet": 1,`, `"errnoRet": 13,`, 1),
		"action":          strings.Replace(base, `"SCMP_ACT_ERRNO", "errnoRet": 1,`, `"SCMP_ACT_KILL_PROCESS",`, 1),
		"value":           strings.Replace(base, "21522", "21523", 1),
		"index":           strings.Replace(base, `"index": 1`, `"index": 2`, 1),
		"operator":        strings.Replace(base, "SCMP_CMP_EQ", "SCMP_CMP_GE", 1),
		"syscall":         strings.Replace(base, `"ioctl"`, `"fcntl"`, 1),
		"added syscall":   strings.Replace(base, `["read", "write"]`, `["read", "write", "close"]`, 1),
		"rule order":      strings.Replace(base, `["read", "write"]`, `["write", "read"]`, 1),
		"default action":  strings.Replace(base, `"defaultErrnoRet": 38`, `"defaultErrnoRet": 1`, 1),
		"architectures":   strings.Replace(base, `, "SCMP_ARCH_AARCH64"`, ``, 1),
		"masked equality": strings.Replace(base, `"value": 21522, "op": "SCMP_CMP_EQ"`, `"value": 65535, "valueTwo": 21522, "op": "SCMP_CMP_MASKED_EQ"`, 1),
	}
	seen := map[[32]byte]string{key: "base"}
	for name, text := range differ {
		if text == base {
			t.Fatalf("%s: the replacement changed nothing", name)
		}
		k := load(text).cacheKey()
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: same key as %s", name, prev)
		}
		seen[k] = name
	}
}

// TestCacheConcurrent compiles one profile from 8 goroutines into an empty
// cache (run it with -race): every one gets the fresh bytes, and one good
// entry and no temporary file is left.
func TestCacheConcurrent(t *testing.T) {
	p := mustLoad(t, "default")
	fresh := compileFresh(t, p)
	c := fileCache{dir: filepath.Join(t.TempDir(), "seccomp")}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				prog, _, err := c.compile(mustLoad(t, "default"))
				if err != nil {
					t.Errorf("fileCache.compile: %v", err)
					return
				}
				if !bytes.Equal(prog.Raw, fresh) {
					t.Errorf("fileCache.compile: bytes differ from a fresh compile")
				}
			}
		})
	}
	wg.Wait()
	entries, err := os.ReadDir(c.dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != filepath.Base(c.path(p.cacheKey())) {
		t.Fatalf("cache dir holds %v (%v), want the one entry", entries, err)
	}
	mustCacheCompile(t, c, p, cacheHit, fresh)
}

// TestCacheUnwritable checks that a cache that cannot be written costs a
// compile, not the run. The test runs as root, which file modes do not
// stop, so the directory's parent is a regular file.
func TestCacheUnwritable(t *testing.T) {
	p := mustLoad(t, "default")
	fresh := compileFresh(t, p)
	file := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := fileCache{dir: filepath.Join(file, "cache", "seccomp")}
	mustCacheCompile(t, c, p, cacheNoStore, fresh)
	mustCacheCompile(t, c, p, cacheNoStore, fresh)
}

// TestCacheWrongArch checks that the cache keeps Compile's refusal of a
// profile written for another machine.
func TestCacheWrongArch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "riscv.json")
	if err := os.WriteFile(path, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_RISCV64"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := fileCache{dir: t.TempDir()}
	if _, _, err := c.compile(mustLoad(t, path)); err == nil || !strings.Contains(err.Error(), "not this machine's") {
		t.Fatalf("fileCache.compile: %v, want a wrong-architecture error", err)
	}
	if entries, _ := os.ReadDir(c.dir); len(entries) != 0 {
		t.Errorf("cache dir holds %v after a refused compile", entries)
	}
}
