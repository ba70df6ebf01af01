package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/internal/mustwork"
)

// testRange is far from DefaultIDRange, so these tests never meet a run's
// ids; each test gets its own lock directory as well.
var testRange = IDRange{Base: 2_140_000_000, Count: 8}

// testIDs allocates a slot for a test that starts an init by hand.
func testIDs(t *testing.T) *runIDs {
	t.Helper()
	ids, err := allocIDs(testRange, t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ids.release() })
	return ids
}

func TestParseIDRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for ok
	}{
		{"2000000000:65536", ""},
		{"3000000000:2", ""},
		{"100000:65536", ""},
		{"0:65536", "host root"},
		{"60000:10000", "host root and the system"},
		{"1000000:1000", "systemd's container range"},
		{"1879048190:4", "systemd's container range"},
		{"4294967294:2", "invalid id"},
		{"2000000001:2", "must be even"},
		{"2000000000:3", "must be even"},
		{"2000000000:0", "must be even"},
		{"2000000000", "BASE:COUNT"},
		{"-2:4", "BASE:COUNT"},
		{"a:b", "BASE:COUNT"},
		{"4294967296:2", "BASE:COUNT"},
	} {
		r, err := ParseIDRange(tc.in)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ParseIDRange(%q) = %v, want ok", tc.in, err)
			} else if r.String() != tc.in {
				t.Errorf("ParseIDRange(%q) = %s", tc.in, r)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseIDRange(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	if err := DefaultIDRange.Check(); err != nil {
		t.Errorf("DefaultIDRange: %v", err)
	}
}

// TestAllocIDs: concurrent holders get distinct slots, a full range is
// refused, a released slot is taken again, and a slot its holder left
// without releasing is taken again only once no process of its ids lives.
func TestAllocIDs(t *testing.T) {
	mustwork.NeedRoot(t) // starts a process as a slot's uid
	dir := t.TempDir()
	var held []*runIDs
	seen := map[uint32]bool{}
	for i := range testRange.Slots() {
		ids, err := allocIDs(testRange, dir, "run")
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		if seen[ids.Root] || seen[ids.Sandbox] || ids.Sandbox != ids.Root+1 {
			t.Fatalf("slot %d: ids %d/%d already handed out or not a pair", i, ids.Root, ids.Sandbox)
		}
		seen[ids.Root], seen[ids.Sandbox] = true, true
		held = append(held, ids)
	}
	if _, err := allocIDs(testRange, dir, "run"); err == nil || !strings.Contains(err.Error(), "all 4 are in use") {
		t.Fatalf("full range: %v, want refused", err)
	}
	if err := held[1].release(); err != nil {
		t.Fatal(err)
	}
	again, err := allocIDs(testRange, dir, "run")
	if err != nil || again.Root != held[1].Root {
		t.Fatalf("after release: %v, %v; want slot %d again", again, err, held[1].Root)
	}
	held[1] = again

	// A crashed holder: the lock is free (closed without release) but the
	// file still names the run, and a process of the slot's program uid
	// lives on.
	crashed := held[2]
	sleeper := exec.Command("sleep", "30")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: crashed.Sandbox, Gid: crashed.Sandbox}}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	crashed.lock.Close()
	if b, err := os.ReadFile(filepath.Join(dir, "2140000004")); err != nil || !strings.Contains(string(b), "run run\n") {
		t.Fatalf("lock file of the crashed slot: %q, %v", b, err)
	}
	if _, err := allocIDs(testRange, dir, "run"); err == nil || !strings.Contains(err.Error(), "1 of them by processes a crashed nsbox left, first uid 2140000004") {
		t.Fatalf("stale slot with a live process: %v, want refused", err)
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if live, _ := idsInUse(crashed.Root, crashed.Sandbox); !live {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	reused, err := allocIDs(testRange, dir, "next")
	if err != nil || reused.Root != crashed.Root {
		t.Fatalf("stale slot, process gone: %v, %v; want slot %d", reused, err, crashed.Root)
	}
	held[2] = reused
	for _, ids := range held {
		ids.release()
	}
}
