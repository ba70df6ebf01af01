package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckFontCache: the check of the font cache the build makes accepts
// font paths inside the root only: matplotlib's own fonts relative to its
// data directory, or clean absolute paths of font files in the root.
func TestCheckFontCache(t *testing.T) {
	root := t.TempDir()
	const data = "/venv/lib/python3.11/site-packages/matplotlib/mpl-data"
	inRoot := func(p string) string { return filepath.Join(root, p) }
	for _, f := range []string{data + "/fonts/ttf/DejaVuSans.ttf", data + "/fonts/afm/pcrb8a.afm", "/usr/share/fonts/x.ttf"} {
		if err := os.MkdirAll(filepath.Dir(inRoot(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(inRoot(f), []byte("font"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := func(version, ttf, afm string) []byte {
		return []byte(`{"_version": "` + version + `", "ttflist": [` + ttf + `], "afmlist": [` + afm + `]}`)
	}
	entry := func(fname string) string { return `{"fname": "` + fname + `", "name": "X"}` }
	good := entry("fonts/ttf/DejaVuSans.ttf") + "," + entry("/usr/share/fonts/x.ttf")
	if err := checkFontCache(cache("3.11.0", good, entry("fonts/afm/pcrb8a.afm")), "3.11.0", data, inRoot); err != nil {
		t.Fatalf("a cache of the root's fonts refused: %v", err)
	}
	for _, c := range []struct {
		name, data, want string
	}{
		{"not JSON", "{", "not matplotlib's font cache"},
		{"another version", string(cache("3.10.0", good, "")), `version "3.10.0"`},
		{"no TrueType font", string(cache("3.11.0", "", entry("fonts/afm/pcrb8a.afm"))), "no TrueType font"},
		{"a path of the build directory", string(cache("3.11.0", good, entry(inRoot(data+"/fonts/afm/pcrb8a.afm")))), "not in the root"},
		{"a path out of the data directory", string(cache("3.11.0", entry("../../../../../../../etc/passwd"), "")), "not a clean path"},
		{"an unclean absolute path", string(cache("3.11.0", entry("/usr/share/fonts/../fonts/x.ttf"), "")), "not a clean path"},
		{"a host font", string(cache("3.11.0", entry("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"), "")), "not in the root"},
		{"a directory", string(cache("3.11.0", entry("fonts/ttf"), "")), "not a regular file"},
	} {
		err := checkFontCache([]byte(c.data), "3.11.0", data, inRoot)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
