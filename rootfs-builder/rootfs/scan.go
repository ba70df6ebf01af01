package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Scan lists every path under dir except MetaDir, sorted, as the manifest
// records it: each regular file hashed (in parallel, one worker per CPU).
// A device, fifo or socket is an error: a root never holds one.
func Scan(dir string) ([]File, error) {
	files, err := scan(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Type == TypeOther {
			return nil, fmt.Errorf("rootfs: scan %s: %s is not a file, directory or symlink", dir, f.Path)
		}
	}
	return files, nil
}

// Known gives the digest of a regular file whose content is known
// already (the path inside the root and its lstat), or false to hash it.
type Known func(p string, fi fs.FileInfo) (sha256 string, ok bool)

// ScanKnown is Scan, except that the files known says it knows are not
// read: their digest is taken from it. A layered root's builder passes the
// digests its parent's manifest records for the files it hard-linked.
func ScanKnown(dir string, known Known) ([]File, error) {
	files, err := scanWith(dir, known)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Type == TypeOther {
			return nil, fmt.Errorf("rootfs: scan %s: %s is not a file, directory or symlink", dir, f.Path)
		}
	}
	return files, nil
}

// scan walks dir without following symlinks, sorts the entries by path
// and hashes the regular files. Entries of another type are TypeOther.
func scan(dir string) ([]File, error) { return scanWith(dir, nil) }

// scanWith is scan, with the digests of the files known knows taken from it.
func scanWith(dir string, known Known) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("rootfs: scan: %w", err)
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return fmt.Errorf("rootfs: scan %s: %w", p, err)
		}
		if rel == MetaDir {
			return fs.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("rootfs: scan: %w", err)
		}
		f := File{Path: "/" + filepath.ToSlash(rel), Mode: modeBits(fi.Mode())}
		switch {
		case fi.Mode().IsRegular():
			f.Type, f.Size = TypeFile, fi.Size()
			if known != nil {
				f.SHA256, _ = known(f.Path, fi)
			}
		case fi.IsDir():
			f.Type = TypeDir
		case fi.Mode()&fs.ModeSymlink != 0:
			f.Type = TypeSymlink
			if f.Target, err = os.Readlink(p); err != nil {
				return fmt.Errorf("rootfs: scan: %w", err)
			}
			f.Size = int64(len(f.Target))
		default:
			f.Type = TypeOther
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortFiles(files)
	if err := hashAll(dir, files); err != nil {
		return nil, err
	}
	return files, nil
}

// sortFiles sorts by path as strings. This is not WalkDir's order, which
// visits "/a/b" before "/a-b".
func sortFiles(files []File) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
}

// modeBits returns the permission bits of m with setuid, setgid and sticky
// in their Unix positions.
func modeBits(m fs.FileMode) uint32 {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}

// hashAll fills in SHA256 (and the size, as read) of every regular file
// that has none yet, with one worker per CPU.
func hashAll(dir string, files []File) error {
	idx := make(chan int)
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for i := range idx {
				f := &files[i]
				f.SHA256, f.Size, errs[i] = hashFile(filepath.Join(dir, filepath.FromSlash(f.Path)), buf)
			}
		})
	}
	for i, f := range files {
		if f.Type == TypeFile && f.SHA256 == "" {
			idx <- i
		}
	}
	close(idx)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// hashFile returns the hex sha256 and size of the regular file at path.
// O_NOFOLLOW: a file replaced by a symlink since the walk is refused, not
// followed out of the root.
func hashFile(path string, buf []byte) (string, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", 0, fmt.Errorf("rootfs: hash: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf)
	if err != nil {
		return "", 0, fmt.Errorf("rootfs: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// sha256Hex returns the hex sha256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
