package cgroup

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestLimitsValidate(t *testing.T) {
	ok := Limits{MemoryBytes: 1 << 20, Pids: 1, CPUs: 0.01}
	for _, tc := range []struct {
		name string
		l    Limits
		want string // "" for valid
	}{
		{"smallest", ok, ""},
		{"many CPUs", Limits{MemoryBytes: 1 << 40, Pids: 1 << 20, CPUs: 64}, ""},
		{"no memory", Limits{Pids: 1, CPUs: 1}, "memory limit"},
		{"negative memory", Limits{MemoryBytes: -1, Pids: 1, CPUs: 1}, "memory limit"},
		{"no pids", Limits{MemoryBytes: 1, CPUs: 1}, "pids limit"},
		{"no CPU", Limits{MemoryBytes: 1, Pids: 1}, "CPU limit"},
		{"quota under 1 ms", Limits{MemoryBytes: 1, Pids: 1, CPUs: 0.009}, "CPU limit"},
		{"NaN CPUs", Limits{MemoryBytes: 1, Pids: 1, CPUs: math.NaN()}, "CPU limit"},
		{"infinite CPUs", Limits{MemoryBytes: 1, Pids: 1, CPUs: math.Inf(1)}, "CPU limit"},
	} {
		err := tc.l.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: validate(%+v) = %v, want %q", tc.name, tc.l, err, tc.want)
		}
	}
}

// TestLimitsSocketBytes: the socket share is part of the memory limit, so
// at most half of it, and never negative.
func TestLimitsSocketBytes(t *testing.T) {
	for _, tc := range []struct {
		socket int64
		ok     bool
	}{{0, true}, {8 << 20, true}, {32 << 20, true}, {32<<20 + 1, false}, {-1, false}} {
		err := Limits{MemoryBytes: 64 << 20, SocketBytes: tc.socket, Pids: 1, CPUs: 1}.validate()
		if (err == nil) != tc.ok {
			t.Errorf("SocketBytes %d of 64MiB: %v, want ok=%v", tc.socket, err, tc.ok)
		}
	}
}

func TestLimitsResources(t *testing.T) {
	l := Limits{MemoryBytes: 32 << 20, Pids: 10, CPUs: 0.5}
	r := l.resources(l.MemoryBytes, true)
	if r.Memory != 32<<20 || r.MemorySwap != 32<<20 || r.MemorySwappiness != nil {
		t.Errorf("memsw host: memory %d, swap %d, swappiness %v; want swap == memory", r.Memory, r.MemorySwap, r.MemorySwappiness)
	}
	if r.PidsLimit == nil || *r.PidsLimit != 10 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || !r.SkipDevices {
		t.Errorf("resources = %+v", r)
	}
	// Without memsw: no memory+swap limit (the write would fail), but
	// swappiness 0.
	r = l.resources(l.MemoryBytes, false)
	if r.MemorySwap != 0 || r.MemorySwappiness == nil || *r.MemorySwappiness != 0 {
		t.Errorf("no-memsw host: swap %d, swappiness %v; want 0 and 0", r.MemorySwap, r.MemorySwappiness)
	}
	if q := (Limits{CPUs: 2.25}).cpuQuota(); q != 225000 {
		t.Errorf("cpuQuota(2.25) = %d, want 225000", q)
	}
}

func TestCheckNames(t *testing.T) {
	for _, name := range []string{"nsbox", "0123abcdef", "run_1", "a.b", "A-Z"} {
		if err := checkName(name); err != nil {
			t.Errorf("checkName(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", ".hidden", "a/b", "a b", "x\x00", strings.Repeat("a", maxName+1)} {
		if err := checkName(name); err == nil {
			t.Errorf("checkName(%q) accepted", name)
		}
	}
	for _, p := range []string{"nsbox", "nsbox-test-1/sub"} {
		if err := checkParent(p); err != nil {
			t.Errorf("checkParent(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "/nsbox", "nsbox/", "a//b", "a/../b", "../x"} {
		if err := checkParent(p); err == nil {
			t.Errorf("checkParent(%q) accepted", p)
		}
	}
}

func TestV1InfoMissingFreezer(t *testing.T) {
	// v1 logic over plain directories standing for mount points.
	h := &host{version: 1, v1: map[string]string{
		"memory": t.TempDir(), "pids": t.TempDir(), "cpu": t.TempDir(), "cpuacct": t.TempDir(),
	}}
	writeFiles(t, h.v1["memory"], map[string]string{tcpLimitFile: "9223372036854771712\n"})
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 1 || !slices.Equal(info.Missing, []string{"freezer"}) || !strings.Contains(info.Hint, "mount -t cgroup") {
		t.Errorf("info = %+v; want version 1, freezer missing, a mount hint", info)
	}
	for _, ctrl := range []string{"memory", "pids", "cpu", "cpuacct"} {
		if info.Controllers[ctrl] != h.v1[ctrl] {
			t.Errorf("Controllers[%s] = %q, want %q", ctrl, info.Controllers[ctrl], h.v1[ctrl])
		}
	}
	// No memory.memsw.* there: runs may start, with a warning.
	if len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "swappiness") {
		t.Errorf("Warnings = %q, want the no-memsw one", info.Warnings)
	}
	if _, err := h.create("nsbox-test", "run1", Limits{MemoryBytes: 1 << 20, Pids: 1, CPUs: 1}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("create without a freezer: %v, want ErrUnavailable", err)
	}
	if info.Sockets != tcpLimitFile {
		t.Errorf("Sockets = %q, want %q", info.Sockets, tcpLimitFile)
	}
}

// TestV1InfoNoTCPAccounting: a v1 memory controller without
// memory.kmem.tcp cannot keep socket buffers within a run's limit, so runs
// are refused (fail closed) with a fix.
func TestV1InfoNoTCPAccounting(t *testing.T) {
	h := &host{version: 1, v1: map[string]string{
		"memory": t.TempDir(), "pids": t.TempDir(), "cpu": t.TempDir(), "cpuacct": t.TempDir(), "freezer": t.TempDir(),
	}}
	info, err := h.info()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Missing, []string{SocketMemory}) || info.Sockets != "" || !strings.Contains(info.Hint, "cgroup v2") {
		t.Errorf("info = %+v; want socket memory missing, with a hint", info)
	}
	if _, err := h.create("nsbox-test", "run1", Limits{MemoryBytes: 1 << 20, Pids: 1, CPUs: 1}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("create without memory.kmem.tcp: %v, want ErrUnavailable", err)
	}
}
