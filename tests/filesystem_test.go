package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/sandbox/result"
)

// TestWritesOutsideWorkspaceFail tries to write everywhere but /workspace
// and /tmp from inside, then checks on the host that nothing appeared.
func TestWritesOutsideWorkspaceFail(t *testing.T) {
	needRoot(t)
	targets := []string{"/", "/usr/lib/python3.11", "/usr/bin", "/etc", "/dev", "/proc/sys/kernel", "/nsbox-canary-dir"}
	code := `
import json, os
targets = ` + pyList(targets) + `
out = {}
for d in targets:
    p = os.path.join(d, "nsbox-write-canary")
    try:
        with open(p, "w") as f:
            f.write("escaped")
        out[d] = "written"
    except OSError as e:
        out[d] = type(e).__name__ + ":" + str(e.errno)
for d in ["/workspace", "/tmp", "/dev/shm"]:
    with open(os.path.join(d, "ok"), "w") as f:
        f.write("ok")
    out[d] = "written"
print(json.dumps(out))
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	var got map[string]string
	if err := json.Unmarshal([]byte(o.res.Stdout), &got); err != nil {
		t.Fatalf("bad program output %q: %v", o.res.Stdout, err)
	}
	for _, d := range targets {
		if got[d] == "written" || got[d] == "" {
			t.Errorf("write into %s: %q, want an error", d, got[d])
		}
		if _, err := os.Stat(filepath.Join(d, "nsbox-write-canary")); err == nil {
			t.Errorf("host: %s/nsbox-write-canary exists after the run", d)
			os.Remove(filepath.Join(d, "nsbox-write-canary"))
		}
	}
	for _, d := range []string{"/workspace", "/tmp", "/dev/shm"} {
		if got[d] != "written" {
			t.Errorf("write into %s: %q, want it to work", d, got[d])
		}
	}
	o.noLeftovers(t)
}

// TestMountinfoNoUndeclaredWritableMount parses /proc/self/mountinfo
// inside: every mount is nosuid, every mount but the device nodes is
// nodev, and only /workspace, /tmp and /dev/shm are writable.
func TestMountinfoNoUndeclaredWritableMount(t *testing.T) {
	needRoot(t)
	o := runPy(t, "default", `print(open("/proc/self/mountinfo").read())`)
	o.wantStatus(t, result.StatusOK)
	writable := map[string]bool{"/workspace": true, "/tmp": true, "/dev/shm": true}
	lines := strings.Split(strings.TrimSpace(o.res.Stdout), "\n")
	if len(lines) < 5 {
		t.Fatalf("mountinfo has %d lines:\n%s", len(lines), o.res.Stdout)
	}
	seen := map[string]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("bad mountinfo line %q", line)
		}
		// Fields after " - ": fstype, source, super options.
		sep := strings.Index(line, " - ")
		fstype := strings.Fields(line[sep+3:])[0]
		mp, opts := f[4], map[string]bool{}
		for _, opt := range strings.Split(f[5], ",") {
			opts[opt] = true
		}
		seen[mp] = true
		if opts["rw"] && !writable[mp] {
			t.Errorf("undeclared writable mount %s (%s)", mp, f[5])
		}
		if opts["rw"] && !opts["noexec"] {
			t.Errorf("writable mount %s is executable (%s)", mp, f[5])
		}
		if !opts["nosuid"] {
			t.Errorf("mount %s lacks nosuid (%s)", mp, f[5])
		}
		// Only binds of the host's device nodes (devtmpfs) and the /dev
		// tmpfs that holds them may allow devices.
		if !opts["nodev"] && fstype != "devtmpfs" && mp != "/dev" {
			t.Errorf("mount %s lacks nodev (%s)", mp, f[5])
		}
	}
	for mp := range writable {
		if !seen[mp] {
			t.Errorf("declared mount %s missing from mountinfo", mp)
		}
	}
	if seen["/sys"] {
		t.Errorf("/sys is mounted; the sandbox should have none")
	}
}

// TestHostFilesInvisible plants a canary file on the host and looks for it
// from inside, by its path and by searching the whole visible tree.
func TestHostFilesInvisible(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	canary := filepath.Join(dir, "host-secret.txt")
	if err := os.WriteFile(canary, []byte("NSBOX-CANARY-7f3a"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `
import os
hits = []
for p in [` + pyStr(canary) + `, "/etc/shadow", "/root", "/home", "/var", "/bin/sh", "/usr/bin/env", "/sys"]:
    if os.path.lexists(p):
        hits.append(p)
for root, dirs, files in os.walk("/", onerror=None):
    if root.startswith("/proc"):
        dirs[:] = []
        continue
    for f in files:
        if f == "host-secret.txt":
            hits.append(os.path.join(root, f))
print("HITS", hits)
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	if strings.TrimSpace(o.res.Stdout) != "HITS []" {
		t.Errorf("host paths visible inside: %s", o.res.Stdout)
	}
}

// TestFreshProcAndMaskedPaths checks /proc shows only the sandbox's
// processes (the reaper, PID 1, and the program) and that runc's masked and read-only paths are covered.
func TestFreshProcAndMaskedPaths(t *testing.T) {
	needRoot(t)
	code := `
import os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("PIDS", "reaper and program" if pids == [1, os.getpid()] else pids)
print("KCORE", len(open("/proc/kcore", "rb").read(16)) if os.path.exists("/proc/kcore") else 0)
print("KEYS", repr(open("/proc/keys").read()))
try:
    open("/proc/sys/kernel/domainname", "w").write("escaped")
    print("PROCSYS written")
except OSError as e:
    print("PROCSYS", e.errno)
`
	o := runPy(t, "default", code)
	o.wantStatus(t, result.StatusOK)
	for _, want := range []string{"PIDS reaper and program", "KCORE 0", "KEYS ''", "PROCSYS 30"} { // 30 = EROFS
		if !strings.Contains(o.res.Stdout, want) {
			t.Errorf("want %q in output:\n%s", want, o.res.Stdout)
		}
	}
}

func pyStr(s string) string { b, _ := json.Marshal(s); return string(b) }

func pyList(ss []string) string { b, _ := json.Marshal(ss); return string(b) }
