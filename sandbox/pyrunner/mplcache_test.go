package pyrunner

import (
	"regexp"
	"strconv"
	"testing"
)

// TestMatplotlibCacheDirMirrored: the runner copies the font cache from
// the directory the rootfs builder writes it to (MatplotlibCacheDir); its
// source states the path (MPL_CACHE_DIR), and the two must agree.
func TestMatplotlibCacheDirMirrored(t *testing.T) {
	m := regexp.MustCompile(`(?m)^MPL_CACHE_DIR = ("[^"\n]*")`).FindAllStringSubmatch(Source, -1)
	if len(m) != 1 {
		t.Fatalf("want one MPL_CACHE_DIR assignment in the runner, found %d", len(m))
	}
	if got, err := strconv.Unquote(m[0][1]); err != nil || got != MatplotlibCacheDir {
		t.Errorf("runner's MPL_CACHE_DIR is %s, pyrunner.MatplotlibCacheDir is %q", m[0][1], MatplotlibCacheDir)
	}
}
