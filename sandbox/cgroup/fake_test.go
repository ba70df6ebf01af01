package cgroup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
)

// fakeOpts tune the emulated kernel of a fake v2 tree.
type fakeOpts struct {
	noKill bool   // no cgroup.kill nor cgroup.freeze (a kernel before 5.2)
	drop   string // a controller the "kernel" never delegates to new cgroups
}

// fakeV2 returns a host over a fake cgroup v2 tree in a temp dir. Its root
// is a real root (no cgroup.type) offering controllers. Like the kernel,
// the fake fills every new cgroup directory with interface files, and a new
// cgroup's cgroup.controllers is its parent's cgroup.subtree_control, so a
// missed delegation step shows up as a missing controller.
func fakeV2(t *testing.T, controllers string, o fakeOpts) *host {
	t.Helper()
	// The library refuses files that are not on cgroupfs unless in test
	// mode; test mode also makes writes truncate, like cgroupfs files.
	// Tests of this package never run in parallel, so this global is safe.
	cgroups.TestMode = true
	t.Cleanup(func() { cgroups.TestMode = false })

	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers":     controllers + "\n",
		"cgroup.subtree_control": "",
		"cgroup.procs":           "",
	})
	h := &host{version: 2, v2root: root, rmdir: os.RemoveAll, killTimeout: 300 * time.Millisecond}
	h.onMkdir = func(dir string) error {
		delegated, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
		if err != nil {
			return err
		}
		var have []string
		for _, w := range strings.Fields(string(delegated)) {
			if w = strings.TrimPrefix(w, "+"); w != o.drop {
				have = append(have, w)
			}
		}
		files := map[string]string{
			"cgroup.controllers":     strings.Join(have, " ") + "\n",
			"cgroup.subtree_control": "",
			"cgroup.procs":           "",
			"cgroup.type":            "domain\n",
			"cgroup.events":          "populated 0\nfrozen 0\n",
			"memory.max":             "max\n",
			"memory.swap.max":        "max\n",
			"memory.oom.group":       "0\n",
			"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
			"memory.peak":            "0\n",
			"pids.max":               "max\n",
			"pids.events":            "max 0\n",
			"cpu.max":                "max 100000\n",
			"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
		}
		if !o.noKill {
			files["cgroup.kill"] = ""
			files["cgroup.freeze"] = "0\n"
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	return h
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// emulateKill plays the kernel's part of cgroup.kill on a fake cgroup:
// once "1" is written there, it empties cgroup.procs. It stops with the
// test.
func emulateKill(t *testing.T, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.kill")); strings.TrimSpace(string(b)) == "1" {
				os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
}
