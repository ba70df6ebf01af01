package audit

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/result"
)

// The test binary doubles as an nsbox process writing to the log: with
// childEnv set it runs one Open+Begin(+Finish) and exits (child).
const (
	childEnv   = "NSBOX_AUDIT_TEST_CHILD" // "finish", "kill" (Begin, then SIGKILL itself) or "reap" (print how many)
	childDBEnv = "NSBOX_AUDIT_TEST_DB"
	childIDEnv = "NSBOX_AUDIT_TEST_ID"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	// Race-enabled children sleep a second at exit unless told not to.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// child is one nsbox process: it waits for standard input to close, so that
// all children start writing at once, then records one run.
func child(mode string) int {
	io.Copy(io.Discard, os.Stdin)
	db, err := Open(os.Getenv(childDBEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if mode == "reap" {
		n, err := db.Reap(context.Background(), ReapLimits{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(n)
		if err := db.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	r := sampleRun(os.Getenv(childIDEnv))
	if err := db.Begin(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if mode == "kill" {
		// A supervisor killed mid-run: no Finish, no Close.
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	r.Status = string(result.StatusOK)
	r.End = r.Start.Add(3 * time.Millisecond)
	if err := db.Finish(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := db.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func intp(i int) *int       { return &i }
func int64p(i int64) *int64 { return &i }
func strp(s string) *string { return &s }

// sampleRun has every field set, some bytes not valid UTF-8, as a run at
// its start (status unfinished, no end).
func sampleRun(id string) *Run {
	return &Run{
		ID:                 id,
		Start:              time.Unix(1_750_000_000, 123456789),
		Policy:             "strict",
		PolicySHA256:       "aa11",
		RootManifestSHA256: "bb22",
		CodeSHA256:         "cc33",
		Code:               strp("print('hi')\n# \xff not UTF-8\n"),
		StdoutBytes:        0,
		Labels:             map[string]string{"team": "ml", "job": "42"},
		NsboxVersion:       "v1.2.3",
	}
}

// finishSample fills in how the sample run ended.
func finishSample(r *Run) {
	r.End = r.Start.Add(1500 * time.Millisecond)
	r.DurationMS = 1500
	r.Status = string(result.StatusError)
	r.ExitCode = intp(3)
	r.CPUMS = int64p(1200)
	r.PeakMemoryBytes = int64p(50 << 20)
	r.StdoutBytes, r.StderrBytes = 70000, 12
	r.StdoutHead = append([]byte("hello \x1b[31m"), make([]byte, 1000)...)
	r.StderrHead = []byte("Traceback\xfe\n")
	r.StdoutTruncated = true
	r.Violations = []result.Violation{
		{Kind: result.ViolationImport, Name: "os", Line: 1, Col: 0, Detail: "import of os denied"},
		{Kind: result.ViolationEvent, Name: "subprocess.Popen", Line: 7, Col: 4, Detail: "event denied"},
	}
}

// sampleNetwork is a network section with n connections: every third one
// refused (plain HTTP to another host, no address, a reason), the others
// allowed tunnels, with the totals to match.
func sampleNetwork(n int) *result.Network {
	net := &result.Network{Mode: result.NetworkAllowlist, Proxy: "127.0.0.1:3128", Connections: []result.Connection{}}
	for i := range n {
		c := result.Connection{Host: fmt.Sprintf("api%d.example.com", i%4), Port: 443, Method: result.ConnectTunnel,
			Address: fmt.Sprintf("192.0.2.%d:443", i%250+1), Allowed: true, BytesSent: int64(100 + i),
			BytesReceived: int64(5000 + i), StartMS: int64(10 * i), DurationMS: int64(3 + i)}
		if i%3 == 2 {
			c.Host, c.Port, c.Method, c.Address, c.Allowed = "evil.example.net", 80, result.ConnectHTTP, "", false
			c.Reason = "not on the allow list of policy web"
			c.BytesSent, c.BytesReceived = 0, 0
			net.Refused++
		}
		net.BytesSent += c.BytesSent
		net.BytesReceived += c.BytesReceived
		net.Connections = append(net.Connections, c)
	}
	return net
}

// newDB opens a fresh database in a directory Open has to create.
func newDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "state", "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawDB is a second, plain connection to db's file for editing it behind
// the package's back.
func rawDB(t testing.TB, db *DB) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite3", db.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// record begins and finishes runs with the given ids, the sample with
// distinct start times one second apart and three connections (the third
// refused).
func record(t testing.TB, db *DB, ids ...string) []*Run {
	t.Helper()
	var out []*Run
	for i, id := range ids {
		r := sampleRun(id)
		r.Start = r.Start.Add(time.Duration(i) * time.Second)
		if err := db.Begin(r); err != nil {
			t.Fatal(err)
		}
		finishSample(r)
		r.Network = sampleNetwork(3)
		if err := db.Finish(r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// sameRun reports the first field where got and want differ, comparing
// times as instants and nil and empty slices and maps as equal.
func sameRun(got, want *Run) error {
	g, w := normal(got), normal(want)
	gv, wv := reflect.ValueOf(g).Elem(), reflect.ValueOf(w).Elem()
	for i := range gv.NumField() {
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			return fmt.Errorf("%s = %#v, want %#v", gv.Type().Field(i).Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	return nil
}

func normal(r *Run) *Run {
	c := *r
	c.Start, c.End = c.Start.UTC().Round(0), c.End.UTC().Round(0)
	if c.StdoutHead == nil {
		c.StdoutHead = []byte{}
	}
	if c.StderrHead == nil {
		c.StderrHead = []byte{}
	}
	if c.Violations == nil {
		c.Violations = []result.Violation{}
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	if c.Network != nil && c.Network.Connections == nil {
		n := *c.Network
		n.Connections = []result.Connection{}
		c.Network = &n
	}
	return &c
}
