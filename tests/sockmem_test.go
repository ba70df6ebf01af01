package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// socketFamilies is a program that tries a socket of each family and
// prints {family: "ok" or the errno name} as JSON. It reaches the socket
// module through asyncio, as a program under default can.
const socketFamilies = `
import asyncio.base_events, errno, json
socket = asyncio.base_events.socket
out = {}
for name, family, kind in [("AF_UNIX", 1, 1), ("AF_INET", 2, 1), ("AF_INET/udp", 2, 2), ("AF_INET6", 10, 1),
                           ("AF_PACKET", 17, 3), ("AF_NETLINK", 16, 3)]:
    try:
        socket.socket(family, kind).close()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

// TestSocketFamiliesRefused: where a policy gives no loopback sockets,
// the OS layer refuses every socket but AF_UNIX, so the Python layer's
// event list is not what stands between a program and loopback TCP: under
// the OS layer of permissive, default and strict, and under default with
// its Python layer (no socket event denied there: the kernel's EPERM is
// the refusal). With loopback_sockets, AF_INET and AF_INET6 work.
func TestSocketFamiliesRefused(t *testing.T) {
	needRoot(t)
	refused := map[string]string{"AF_UNIX": "ok", "AF_INET": "EPERM", "AF_INET/udp": "EPERM", "AF_INET6": "EPERM",
		"AF_PACKET": "EPERM", "AF_NETLINK": "EPERM"}
	loopback := map[string]string{"AF_UNIX": "ok", "AF_INET": "ok", "AF_INET/udp": "ok", "AF_INET6": "ok",
		"AF_PACKET": "EPERM", "AF_NETLINK": "EPERM"}
	for _, tc := range []struct {
		name, policy string
		want         map[string]string
		seccomp      string
	}{
		{"permissive", "permissive", refused, "default"},
		{"default-os", "default", refused, "default"},
		{"strict-os", "strict", refused, "strict"},
		// The Python layer denies every process-creation event: the
		// filter refuses processes too.
		{"default", "default", refused, "default+noproc"},
		{"loopback", loopbackPolicy(t, ""), loopback, "default+loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o *outcome
			if tc.name == "permissive" || tc.name == "default" {
				o = runPyLayer(t, tc.policy, socketFamilies)
			} else {
				o = runPy(t, tc.policy, socketFamilies)
			}
			o.wantStatus(t, result.StatusOK)
			got := map[string]string{}
			if err := json.Unmarshal([]byte(o.res.Stdout), &got); err != nil {
				t.Fatalf("output %q: %v\nstderr: %s", o.res.Stdout, err, o.res.Stderr)
			}
			for family, want := range tc.want {
				if got[family] != want {
					t.Errorf("%s: %q, want %q", family, got[family], want)
				}
			}
			if len(o.res.Violations) != 0 {
				t.Errorf("violations %+v: the refusals are the kernel's", o.res.Violations)
			}
			if o.res.Sandbox.Seccomp != tc.seccomp {
				t.Errorf("sandbox.seccomp %q, want %q", o.res.Sandbox.Seccomp, tc.seccomp)
			}
		})
	}
}

// loopbackPolicy writes a policy: permissive with loopback sockets, and
// memory as the memory limit when not "" (with a workspace small enough
// to fit in it, as the policy loader requires).
func loopbackPolicy(t *testing.T, memory string) string {
	t.Helper()
	s := "extends = \"permissive\"\n"
	if memory != "" {
		s += "[limits]\nmemory = \"" + memory + "\"\nworkspace_size = \"16MiB\"\n"
	}
	s += "[sandbox]\nloopback_sockets = true\n"
	p := filepath.Join(t.TempDir(), "loopback.toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tcpFill fills TCP buffers on loopback inside the sandbox, bounded: a
// 127.0.0.1 listener of its own, connections whose receivers never read,
// each sender writing until the kernel stops taking data, until TARGET
// bytes were taken, 400 sockets were open or 15 s passed. It then creates
// /workspace/held, holds everything for HOLD seconds and prints
// {"sent": bytes, "conns": n, "error": ...} as JSON.
const tcpFill = `
import json, os, socket, time
TARGET, HOLD = %d, 3
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(512)
held, sent, error = [], 0, None
chunk = b"x" * 65536
t0 = time.monotonic()
try:
    while sent < TARGET and len(held) < 400 and time.monotonic() - t0 < 15:
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        c.connect(srv.getsockname())
        s, _ = srv.accept()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        c.setblocking(False)
        held += [c, s]
        while sent < TARGET:
            try:
                sent += c.send(chunk)
            except BlockingIOError:
                break
except OSError as e:
    error = repr(e)
open("/workspace/held", "w").close()
time.sleep(HOLD)
print(json.dumps({"sent": sent, "conns": len(held) // 2, "error": error}))
`

// hostMem reads the host's TCP socket memory (/proc/net/sockstat, in
// bytes) and MemAvailable (bytes).
func hostMem(t *testing.T) (tcp, avail int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[0] == "TCP:" && f[i] == "mem" {
				pages, _ := strconv.ParseInt(f[i+1], 10, 64)
				tcp = pages * int64(os.Getpagesize())
			}
		}
	}
	b, err = os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			avail = kb << 10
		}
	}
	return tcp, avail
}

// TestSocketMemoryBounded fills TCP buffers on loopback from a run that
// may make TCP sockets (loopback_sockets), trying four times its memory
// limit, and measures the host while the run holds them: the host's TCP
// memory and MemAvailable move by less than the run's memory limit
// (cgroup v1: memory.kmem.tcp.limit_in_bytes; v2: memory.max), and come
// back afterwards. Without the limit the kernel takes all four times (it
// charges the host's tcp_mem), which the test would see.
func TestSocketMemoryBounded(t *testing.T) {
	needRoot(t)
	const limit = 128 << 20
	policy := loopbackPolicy(t, "128MiB")
	ws := sandboxWorkspace(t)
	tcp0, avail0 := hostMem(t)
	var tcp1, avail1 int64
	code := strings.Replace(tcpFill, "%d", strconv.Itoa(4*limit), 1)
	if unifiedCgroup() {
		socketMemoryV2(t, policy, ws, code, limit, tcp0)
		return
	}
	o := nsbox(t, run{
		args: []string{"run", "--json", "--policy", policy, "--workspace", ws, "-c", code},
		whileRuns: func(*os.Process) {
			if !waitFile(filepath.Join(ws, "held"), 30*time.Second) {
				t.Errorf("the program never reported holding its sockets")
				return
			}
			tcp1, avail1 = hostMem(t)
		},
	})
	o.wantStatus(t, result.StatusOK)
	var got struct {
		Sent  int64   `json:"sent"`
		Conns int     `json:"conns"`
		Error *string `json:"error"`
	}
	if err := json.Unmarshal([]byte(o.res.Stdout), &got); err != nil {
		t.Fatalf("output %q: %v\nstderr: %s", o.res.Stdout, err, o.res.Stderr)
	}
	// Give the kernel a moment to free the closed sockets' buffers.
	time.Sleep(500 * time.Millisecond)
	tcp2, avail2 := hostMem(t)
	t.Logf("memory limit %d MiB; program: %d MiB taken by the kernel on %d connections (error %v)",
		limit>>20, got.Sent>>20, got.Conns, got.Error)
	t.Logf("host TCP memory: before %d MiB, holding %d MiB, after %d MiB", tcp0>>20, tcp1>>20, tcp2>>20)
	t.Logf("host MemAvailable: before %d MiB, holding %d MiB, after %d MiB", avail0>>20, avail1>>20, avail2>>20)
	if got.Sent < 1<<20 {
		t.Fatalf("the program could not fill any socket buffer (%d bytes): the test shows nothing", got.Sent)
	}
	if got.Sent > limit {
		t.Errorf("the kernel took %d MiB of socket data from a run limited to %d MiB", got.Sent>>20, limit>>20)
	}
	if d := tcp1 - tcp0; d > limit {
		t.Errorf("host TCP memory grew by %d MiB while the run held its sockets, more than its %d MiB limit", d>>20, limit>>20)
	}
	if d := avail0 - avail1; d > limit {
		t.Errorf("host MemAvailable dropped by %d MiB while the run held its sockets, more than its %d MiB limit", d>>20, limit>>20)
	}
	if d := tcp2 - tcp0; d > 16<<20 {
		t.Errorf("host TCP memory still %d MiB above its start after the run", d>>20)
	}
}

// socketMemoryV2 is TestSocketMemoryBounded on a cgroup v2 host, where
// socket buffers are charged to memory.max like any other memory: a run
// that fills them past its limit meets the OOM killer and ends
// memory_limit (v1's kmem.tcp limit refuses the buffers instead), and the
// host's TCP memory is back afterwards.
func socketMemoryV2(t *testing.T, policy, ws, code string, limit, tcp0 int64) {
	t.Helper()
	o := nsbox(t, run{args: []string{"run", "--json", "--policy", policy, "--workspace", ws, "-c", code}})
	o.wantStatus(t, result.StatusMemoryLimit)
	time.Sleep(500 * time.Millisecond)
	tcp2, _ := hostMem(t)
	p := o.res.PeakMemoryBytes
	if p == nil {
		t.Fatal("peak_memory_bytes is null")
	}
	t.Logf("memory limit %d MiB; peak %d MiB; host TCP memory before %d MiB, after %d MiB",
		limit>>20, *p>>20, tcp0>>20, tcp2>>20)
	// Buffers charged where the kernel cannot reclaim (receiving, in
	// softirq) are forced past memory.max, so the peak may pass the limit
	// a little; the flood tries four times the limit.
	if *p > 2*limit {
		t.Errorf("peak_memory_bytes %d MiB, want below twice the %d MiB limit", *p>>20, limit>>20)
	}
	if d := tcp2 - tcp0; d > 16<<20 {
		t.Errorf("host TCP memory still %d MiB above its start after the run", d>>20)
	}
}
