package output

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// genReader yields n bytes of a repeating pattern without allocating them,
// in reads of at most chunk bytes.
type genReader struct {
	n, chunk int64
}

var pattern = []byte("abcdefghijklmnopqrstuvwxyz\n")

func (g *genReader) Read(p []byte) (int, error) {
	if g.n <= 0 {
		return 0, io.EOF
	}
	m := min(int64(len(p)), g.n, g.chunk)
	for i := int64(0); i < m; {
		i += int64(copy(p[i:m], pattern))
	}
	g.n -= m
	return int(m), nil
}

func TestCap(t *testing.T) {
	const limit = 100
	tests := []struct {
		name      string
		size      int
		chunk     int64
		truncated bool
	}{
		{"empty", 0, 1, false},
		{"under", limit - 1, 7, false},
		{"exact one read", limit, 1 << 20, false},
		{"exact byte reads", limit, 1, false},
		{"one over one read", limit + 1, 1 << 20, true},
		{"one over byte reads", limit + 1, 1, true},
		{"far over", 10 * limit, 33, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := bytes.Repeat([]byte("x"), tt.size)
			var calls atomic.Int32
			var tee bytes.Buffer
			s := NewStream(limit, &tee, func() { calls.Add(1) })
			r := &chunkReader{r: bytes.NewReader(input), chunk: tt.chunk}
			if err := s.Copy(r); err != nil {
				t.Fatalf("Copy: %v", err)
			}
			want := input[:min(tt.size, limit)]
			if !bytes.Equal(s.Bytes(), want) {
				t.Errorf("Bytes() has %d bytes, want %d", len(s.Bytes()), len(want))
			}
			if !bytes.Equal(tee.Bytes(), want) {
				t.Errorf("tee got %d bytes, want exactly the %d kept", tee.Len(), len(want))
			}
			if s.Truncated() != tt.truncated {
				t.Errorf("Truncated() = %v, want %v", s.Truncated(), tt.truncated)
			}
			wantCalls := int32(0)
			if tt.truncated {
				wantCalls = 1
			}
			if got := calls.Load(); got != wantCalls {
				t.Errorf("onLimit called %d times, want %d", got, wantCalls)
			}
			if s.Total() != int64(tt.size) {
				t.Errorf("Total() = %d, want %d", s.Total(), tt.size)
			}
		})
	}
}

// chunkReader limits each Read from r to chunk bytes.
type chunkReader struct {
	r     io.Reader
	chunk int64
}

func (c *chunkReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(int64(len(p)), c.chunk)])
}

func TestLimitZero(t *testing.T) {
	for _, limit := range []int64{0, -5} {
		called := 0
		var tee bytes.Buffer
		s := NewStream(limit, &tee, func() { called++ })
		if err := s.Copy(strings.NewReader("")); err != nil {
			t.Fatal(err)
		}
		if s.Truncated() || called != 0 {
			t.Errorf("limit %d, no input: truncated=%v calls=%d", limit, s.Truncated(), called)
		}
		if err := s.Copy(strings.NewReader("hi")); err != nil {
			t.Fatal(err)
		}
		if !s.Truncated() || called != 1 || len(s.Bytes()) != 0 || tee.Len() != 0 || s.Total() != 2 {
			t.Errorf("limit %d: truncated=%v calls=%d kept=%d teed=%d total=%d",
				limit, s.Truncated(), called, len(s.Bytes()), tee.Len(), s.Total())
		}
	}
}

func TestNilCallbackAndTee(t *testing.T) {
	s := NewStream(3, nil, nil)
	if err := s.Copy(strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	if got := string(s.Bytes()); got != "hel" || !s.Truncated() || s.Total() != 5 {
		t.Errorf("got %q truncated=%v total=%d", got, s.Truncated(), s.Total())
	}
}

// TestFloodMemoryBounded streams 1 GiB through a 64 KiB cap and checks that
// the supervisor's heap does not grow with the input.
func TestFloodMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 1 GiB")
	}
	const (
		limit = 64 << 10
		flood = 1 << 30
		bound = 8 << 20
	)
	calls := 0
	s := NewStream(limit, io.Discard, func() { calls++ })
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.Copy(&genReader{n: flood, chunk: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	t.Logf("1 GiB through a 64 KiB cap: TotalAlloc +%d, HeapAlloc %d -> %d",
		after.TotalAlloc-before.TotalAlloc, before.HeapAlloc, after.HeapAlloc)
	if d := after.TotalAlloc - before.TotalAlloc; d > bound {
		t.Errorf("Copy allocated %d bytes in total for a %d-byte cap, want < %d", d, limit, bound)
	}
	if after.HeapAlloc > before.HeapAlloc && after.HeapAlloc-before.HeapAlloc > bound {
		t.Errorf("heap grew by %d bytes, want < %d", after.HeapAlloc-before.HeapAlloc, bound)
	}
	if s.Total() != flood || !s.Truncated() || len(s.Bytes()) != limit || calls != 1 {
		t.Errorf("total=%d truncated=%v kept=%d calls=%d", s.Total(), s.Truncated(), len(s.Bytes()), calls)
	}
}

// errWriter fails every write after the first ok bytes.
type errWriter struct {
	buf bytes.Buffer
	ok  int
}

var errTee = errors.New("tee broken")

func (w *errWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.ok {
		return 0, errTee
	}
	return w.buf.Write(p)
}

func TestTeeErrorStopsTeeNotCapture(t *testing.T) {
	w := &errWriter{ok: 4}
	s := NewStream(100, w, nil)
	err := s.Copy(&chunkReader{r: strings.NewReader("abcdefghij"), chunk: 2})
	if !errors.Is(err, errTee) {
		t.Fatalf("Copy err = %v, want %v", err, errTee)
	}
	if got := string(s.Bytes()); got != "abcdefghij" {
		t.Errorf("kept %q, want all input", got)
	}
	if got := w.buf.String(); got != "abcd" {
		t.Errorf("tee got %q, want %q", got, "abcd")
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestTeeShortWrite(t *testing.T) {
	s := NewStream(100, shortWriter{}, nil)
	if err := s.Copy(strings.NewReader("abcd")); !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("Copy err = %v, want io.ErrShortWrite", err)
	}
}

// failReader returns data once, then err.
type failReader struct {
	data string
	err  error
	done bool
}

func (f *failReader) Read(p []byte) (int, error) {
	if f.done {
		return 0, f.err
	}
	f.done = true
	return copy(p, f.data), nil
}

func TestReadErrors(t *testing.T) {
	other := errors.New("disk on fire")
	tests := []struct {
		err  error
		want error
	}{
		{io.EOF, nil},
		{syscall.EBADF, nil},
		{&os.PathError{Op: "read", Path: "|0", Err: syscall.EBADF}, nil},
		{os.ErrClosed, nil},
		{&os.PathError{Op: "read", Path: "|0", Err: os.ErrClosed}, nil},
		{other, other},
		{fmt.Errorf("wrapped: %w", syscall.EIO), syscall.EIO},
	}
	for _, tt := range tests {
		s := NewStream(10, nil, nil)
		err := s.Copy(&failReader{data: "ok", err: tt.err})
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("read error %v: Copy returned %v, want %v", tt.err, err, tt.want)
		}
		if string(s.Bytes()) != "ok" {
			t.Errorf("read error %v: kept %q, want %q", tt.err, s.Bytes(), "ok")
		}
	}
}

// TestTeeErrorBeforeReadError checks that the first error wins.
func TestTeeErrorBeforeReadError(t *testing.T) {
	s := NewStream(10, &errWriter{}, nil)
	err := s.Copy(&failReader{data: "ok", err: syscall.EIO})
	if !errors.Is(err, errTee) {
		t.Errorf("Copy err = %v, want the earlier tee error", err)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	if err := NewStream(10, nil, nil).Copy(emptyReader{}); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("Copy err = %v, want io.ErrNoProgress", err)
	}
}

// TestKeepOnly: a passed-on stream keeps only its head, while the tee
// gets every byte under the limit and the limit still stops it.
func TestKeepOnly(t *testing.T) {
	const limit, keep = 1000, 10
	var tee bytes.Buffer
	calls := 0
	s := NewStream(limit, &tee, func() { calls++ })
	s.KeepOnly(keep)
	input := bytes.Repeat(pattern, 3*limit/len(pattern)+1)[:3*limit]
	if err := s.Copy(&chunkReader{r: bytes.NewReader(input), chunk: 7}); err != nil {
		t.Fatal(err)
	}
	want := input[:limit]
	if !bytes.Equal(tee.Bytes(), want) {
		t.Errorf("tee got %d bytes, want the %d under the limit", tee.Len(), limit)
	}
	if !bytes.Equal(s.Kept(), want[:keep]) || cap(s.Kept()) > keep {
		t.Errorf("kept %q (cap %d), want %q in at most %d bytes", s.Kept(), cap(s.Kept()), want[:keep], keep)
	}
	if s.Total() != 3*limit || !s.Truncated() || calls != 1 {
		t.Errorf("total=%d truncated=%v calls=%d", s.Total(), s.Truncated(), calls)
	}
	// Clamped to 0..limit.
	s = NewStream(5, nil, nil)
	s.KeepOnly(100)
	if s.Copy(strings.NewReader("0123456789")); string(s.Kept()) != "01234" {
		t.Errorf("KeepOnly above the limit: kept %q, want %q", s.Kept(), "01234")
	}
}

// TestKeptHeldOnce: a stream filled to its limit holds one array of
// exactly the limit, allocated at most twice (the small first one and the
// full one), never a doubling series; Kept is that array, not a copy.
func TestKeptHeldOnce(t *testing.T) {
	const limit = 8 << 20
	s := NewStream(limit, nil, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.Copy(&genReader{n: 2 * limit, chunk: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > limit+firstKeep+readBufSize+(64<<10) {
		t.Errorf("Copy to an %d-byte limit allocated %d bytes, want the limit and small buffers", limit, d)
	}
	k := s.Kept()
	if len(k) != limit || cap(k) != limit {
		t.Errorf("kept len %d cap %d, want %d", len(k), cap(k), limit)
	}
	if &s.Kept()[0] != &k[0] {
		t.Error("Kept returned a copy")
	}
}

// TestKeepHeadAndTail: in truncate mode a stream past its limit keeps its
// first half-limit and its last bytes up to the limit, never calls
// onLimit, and a tee gets the head live, then the marker and the tail; a
// stream that fits is passed on whole, without a marker.
func TestKeepHeadAndTail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		limit   int64
		kept    string
		tee     string
		trunc   bool
		chunkSz int
	}{
		{"fits", "abcdefgh", 10, "abcdefgh", "abcdefgh", false, 3},
		{"exactly", "abcdefghij", 10, "abcdefghij", "abcdefghij", false, 1},
		{"over", "0123456789ABCDEFGHIJ", 10, "01234FGHIJ", "01234\n[nsbox: 10 bytes of stdout left out here: output_limit 10, output_mode truncate]\nFGHIJ", true, 3},
		{"over, one read", "0123\n56789ABCDEFGHIJ", 10, "0123\nFGHIJ", "0123\n[nsbox: 10 bytes of stdout left out here: output_limit 10, output_mode truncate]\nFGHIJ", true, 100},
		{"ring wraps", strings.Repeat("x", 7) + "0123456789", 4, "xx89", "xx\n[nsbox: 13 bytes of stdout left out here: output_limit 4, output_mode truncate]\n89", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tee bytes.Buffer
			called := false
			s := NewStream(tc.limit, &tee, func() { called = true })
			s.KeepHeadAndTail("stdout")
			r := &sizedReader{data: []byte(tc.in), size: tc.chunkSz}
			if err := s.Copy(r); err != nil {
				t.Fatal(err)
			}
			if got := string(s.Kept()); got != tc.kept {
				t.Errorf("kept %q, want %q", got, tc.kept)
			}
			if got := string(s.Bytes()); got != tc.kept {
				t.Errorf("bytes %q, want %q", got, tc.kept)
			}
			if tee.String() != tc.tee {
				t.Errorf("tee %q, want %q", tee.String(), tc.tee)
			}
			if s.Truncated() != tc.trunc || called {
				t.Errorf("truncated %v (want %v), onLimit called %v", s.Truncated(), tc.trunc, called)
			}
			if s.Total() != int64(len(tc.in)) {
				t.Errorf("total %d, want %d", s.Total(), len(tc.in))
			}
		})
	}
}

// sizedReader returns data, size bytes per Read.
type sizedReader struct {
	data []byte
	size int
}

func (c *sizedReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.data)
	c.data = c.data[n:]
	return n, nil
}
