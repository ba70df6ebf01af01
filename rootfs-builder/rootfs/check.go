package rootfs

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Check is the cheap check run before every run. It reads the header,
// hashes manifest.json and compares it with the header's digest, then
// lstats each critical file and compares its type, mode and size (and a
// symlink's target) with the header. It reads no other file, so it costs a
// few hundred microseconds; it catches a damaged or replaced interpreter,
// loader or libc, and any change to the manifest, but not a same-size edit
// of a critical file or any edit of another file (see Verify).
//
// Errors name the root and the file at fault; a mismatch wraps ErrMismatch.
func Check(dir string) (*Header, error) {
	h, err := readHeader(dir)
	if err != nil {
		return nil, err
	}
	mp := filepath.Join(dir, MetaDir, ManifestFile)
	sum, _, err := hashFile(mp, make([]byte, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("rootfs: check root %s: %w", dir, err)
	}
	if sum != h.ManifestSHA256 {
		return nil, fmt.Errorf("rootfs: root %s: %s has sha256 %s, the header says %s: %w",
			dir, filepath.Join(MetaDir, ManifestFile), sum, h.ManifestSHA256, ErrMismatch)
	}
	for _, want := range h.Critical {
		got, err := lstatFile(dir, want.Path)
		if err != nil {
			return nil, fmt.Errorf("rootfs: root %s: critical file %s: %w (%w)", dir, want.Path, err, ErrMismatch)
		}
		if d := differs(want, got, false); d != "" {
			return nil, fmt.Errorf("rootfs: root %s: critical file %s: %s: %w", dir, want.Path, d, ErrMismatch)
		}
	}
	return h, nil
}

// readHeader reads and validates DIR/.nsbox/root.json.
func readHeader(dir string) (*Header, error) {
	p := filepath.Join(dir, MetaDir, HeaderFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("rootfs: check root %s: %w", dir, err)
	}
	var h Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("rootfs: check root %s: read %s: %w", dir, p, err)
	}
	if h.Format != FormatVersion {
		return nil, fmt.Errorf("rootfs: check root %s: %s: format %d, this nsbox reads format %d", dir, p, h.Format, FormatVersion)
	}
	if !isRootPath(h.Python.Path) {
		return nil, fmt.Errorf("rootfs: check root %s: %s: python path %q is not an absolute clean path", dir, p, h.Python.Path)
	}
	for _, c := range h.Critical {
		if !isRootPath(c.Path) || c.Path == "/" {
			return nil, fmt.Errorf("rootfs: check root %s: %s: critical path %q is not an absolute clean path below /", dir, p, c.Path)
		}
	}
	return &h, nil
}

// lstatFile describes the path p inside the root dir as the manifest
// would, without its digest.
func lstatFile(dir, p string) (File, error) {
	full := filepath.Join(dir, filepath.FromSlash(p))
	fi, err := os.Lstat(full)
	if err != nil {
		return File{}, err
	}
	f := File{Path: p, Mode: modeBits(fi.Mode())}
	switch {
	case fi.Mode().IsRegular():
		f.Type, f.Size = TypeFile, fi.Size()
	case fi.IsDir():
		f.Type = TypeDir
	case fi.Mode()&fs.ModeSymlink != 0:
		f.Type = TypeSymlink
		if f.Target, err = os.Readlink(full); err != nil {
			return File{}, err
		}
		f.Size = int64(len(f.Target))
	default:
		f.Type = TypeOther
	}
	return f, nil
}

// differs describes how got differs from the manifest entry want, or
// returns "". Digests are compared only when withHash is set.
func differs(want, got File, withHash bool) string {
	switch {
	case got.Type != want.Type:
		return fmt.Sprintf("is a %s, the manifest says %s", got.Type, want.Type)
	case got.Mode != want.Mode:
		return fmt.Sprintf("mode %04o, the manifest says %04o", got.Mode, want.Mode)
	case want.Type == TypeSymlink && got.Target != want.Target:
		return fmt.Sprintf("points to %q, the manifest says %q", got.Target, want.Target)
	case want.Type == TypeFile && got.Size != want.Size:
		return fmt.Sprintf("size %d, the manifest says %d", got.Size, want.Size)
	case want.Type == TypeFile && withHash && got.SHA256 != want.SHA256:
		return fmt.Sprintf("sha256 %s, the manifest says %s", got.SHA256, want.SHA256)
	}
	return ""
}
