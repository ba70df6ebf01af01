package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/internal/mustwork"
	"github.com/nsbox/nsbox/rootfs-builder/resolve"
	"github.com/nsbox/nsbox/rootfs-builder/resolve/resolvetest"
)

func TestRootfsLock(t *testing.T) {
	mustwork.NeedPath(t, resolve.DefaultPython)
	uv := os.Getenv("NSBOX_UV")
	if uv == "" {
		if p, err := exec.LookPath("uv"); err == nil {
			uv = p
		} else if p, err := filepath.Abs(filepath.Join("..", "..", resolve.ToolsVenv, "bin", "uv")); err == nil {
			if _, err := os.Stat(p); err == nil {
				uv = p
			}
		}
	}
	if uv == "" {
		mustwork.Skip(t, "no uv: not on PATH, NSBOX_UV unset, no tools venv (run `make tools-venv`)")
	}
	t.Setenv("UV_CACHE_DIR", t.TempDir())
	wheels, dir := t.TempDir(), t.TempDir()
	resolvetest.WriteWheel(t, wheels, "alpha", "1.0", "beta")
	resolvetest.WriteWheel(t, wheels, "beta", "1.0")
	reqs, lock := filepath.Join(dir, "requirements.txt"), filepath.Join(dir, "extra.lock")
	if err := os.WriteFile(reqs, []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"lock", "--uv", uv, "--no-index", "--offline", "--find-links", wheels, "-o", lock}

	out, errOut, code := runRootfs(t, append(args, "--json", reqs)...)
	if code != 0 {
		t.Fatalf("lock: exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct {
		Lock     string
		Changed  bool
		Packages []struct{ Name, Version string }
		Target   struct{ ABI string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if res.Lock != lock || !res.Changed || len(res.Packages) != 2 || res.Packages[1].Name != "beta" || res.Target.ABI != "cp311" {
		t.Errorf("result %+v", res)
	}
	out, errOut, code = runRootfs(t, append(args, reqs)...)
	if code != 0 || !strings.Contains(out, "2 packages for CPython 3.11 ") || !strings.Contains(out, "unchanged") {
		t.Errorf("lock again: exit %d, %q %q; want the lock unchanged", code, out, errOut)
	}

	if err := os.WriteFile(reqs, []byte("alpha\n-r more.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = runRootfs(t, append(args, "--json", reqs)...)
	if want := reqs + ":2: -r: other files cannot be included"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("bad list: exit %d, %q; want 1 and %s", code, out, want)
	}
	if _, errOut, code = runRootfs(t, "lock", "--uv", uv, reqs); code != 1 {
		t.Errorf("without -o: exit %d %q, want 1", code, errOut)
	}
}
