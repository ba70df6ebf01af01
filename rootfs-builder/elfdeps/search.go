package elfdeps

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultLdSoConf is the loader configuration Closure reads.
const DefaultLdSoConf = "/etc/ld.so.conf"

// maxConfDepth bounds `include` nesting, so an include cycle terminates.
const maxConfDepth = 8

// defaultDirs returns the loader's built-in search directories (glibc's
// SYSTEM_DIRS) for objects of the given class and machine, Debian multiarch
// directories first.
func defaultDirs(class elf.Class, machine elf.Machine) []string {
	var triplet string
	switch machine {
	case elf.EM_X86_64:
		triplet = "x86_64-linux-gnu"
	case elf.EM_AARCH64:
		triplet = "aarch64-linux-gnu"
	case elf.EM_386:
		triplet = "i386-linux-gnu"
	case elf.EM_ARM:
		triplet = "arm-linux-gnueabihf"
	case elf.EM_RISCV:
		triplet = "riscv64-linux-gnu"
	}
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	if class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// platform is the value of $PLATFORM (the kernel's AT_PLATFORM) for machine,
// or "" when we do not know it.
func platform(machine elf.Machine) string {
	switch machine {
	case elf.EM_X86_64:
		return "x86_64"
	case elf.EM_AARCH64:
		return "aarch64"
	}
	return ""
}

// expand substitutes the dynamic string tokens $ORIGIN and $PLATFORM (also
// written ${ORIGIN}, ${PLATFORM}) in s, as ld.so does for DT_RPATH,
// DT_RUNPATH and DT_NEEDED. It reports false when s uses a token that cannot
// be expanded: $LIB (its value is fixed when glibc is built), or $ORIGIN or
// $PLATFORM with an empty value. ld.so drops such a search path element.
// Other $ sequences are left as they are, as ld.so does.
func expand(s, origin, plat string) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		name, n := dstName(s)
		var val string
		switch name {
		case "ORIGIN":
			val = origin
		case "PLATFORM":
			val = plat
		case "LIB":
			return "", false
		default:
			b.WriteByte('$')
			continue
		}
		if val == "" {
			return "", false
		}
		b.WriteString(val)
		s = s[n:]
	}
}

// dstName recognises a token name at the start of s (just after a '$'):
// "NAME" not followed by a name character, or "{NAME}". It returns the name
// and the number of bytes it spans, or "" if s starts with no known token.
func dstName(s string) (string, int) {
	for _, name := range [...]string{"ORIGIN", "PLATFORM", "LIB"} {
		if strings.HasPrefix(s, "{"+name+"}") {
			return name, len(name) + 2
		}
		if strings.HasPrefix(s, name) && (len(s) == len(name) || !isNameByte(s[len(name)])) {
			return name, len(name)
		}
	}
	return "", 0
}

func isNameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// readLdSoConf returns the directories listed in the ld.so.conf file at path,
// following `include` lines (glob patterns, relative to the including file's
// directory, expanded in sorted order), in order and without duplicates.
// A missing file yields no directories. Syntax follows ldconfig: '#'
// comments, one directory per line, `hwcap` lines ignored, a legacy "=TYPE"
// suffix ignored, trailing slashes removed.
func readLdSoConf(path string) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	err := readConf(path, 0, func(d string) {
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	})
	return dirs, err
}

func readConf(path string, depth int, add func(string)) error {
	if depth > maxConfDepth {
		return fmt.Errorf("read %s: includes nested deeper than %d", path, maxConfDepth)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "include" && len(fields) > 1:
			for _, pat := range fields[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(path), pat)
				}
				matches, err := filepath.Glob(pat)
				if err != nil {
					return fmt.Errorf("read %s: include %q: %w", path, pat, err)
				}
				for _, m := range matches {
					if err := readConf(m, depth+1, add); err != nil {
						return err
					}
				}
			}
		case strings.EqualFold(fields[0], "hwcap") && len(fields) > 1:
		default:
			d, _, _ := strings.Cut(line, "=")
			d = strings.TrimRight(strings.TrimSpace(d), "/")
			if d != "" {
				add(d)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
