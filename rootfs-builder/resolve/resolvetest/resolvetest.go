// Package resolvetest writes the tiny wheels and source distributions
// the lock tests resolve against, offline.
package resolvetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteWheel writes a pure-Python wheel NAME-VERSION-py3-none-any.whl
// with one module and the given Requires-Dist.
func WriteWheel(t testing.TB, dir, name, version string, deps ...string) {
	t.Helper()
	WriteWheelTag(t, dir, name, version, "py3-none-any", deps...)
}

// WriteWheelTag writes a wheel NAME-VERSION-TAG.whl (for example
// "cp312-cp312-manylinux_2_17_x86_64"), its content pure Python.
func WriteWheelTag(t testing.TB, dir, name, version, tag string, deps ...string) {
	t.Helper()
	info := name + "-" + version + ".dist-info"
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	for _, d := range deps {
		meta += "Requires-Dist: " + d + "\n"
	}
	files := [][2]string{
		{name + "/__init__.py", "VERSION = " + fmt.Sprintf("%q", version) + "\n"},
		{info + "/METADATA", meta},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: nsbox-test\nRoot-Is-Purelib: true\nTag: " + tag + "\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(info + "/RECORD,,\n")
	files = append(files, [2]string{info + "/RECORD", record.String()})
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+"-"+tag+".whl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteSdist writes a source distribution NAME-VERSION.tar.gz holding
// PKG-INFO only (never built: the lock refuses it first).
func WriteSdist(t testing.TB, dir, name, version string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	info := []byte("Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: name + "-" + version + "/PKG-INFO", Mode: 0o644, Size: int64(len(info))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(info); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+".tar.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
