package output

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestCutDrains: every byte written to the pipe before Cut is in the
// segment Cut returns, never in the next one, however the writes and the
// reader's progress interleave; each segment has its own limit.
func TestCutDrains(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(100<<10, nil, func() { t.Error("onLimit called") })
	done := make(chan error, 1)
	go func() { done <- s.CopyPipe(pr) }()
	for i := range 500 {
		// Sizes around the pipe's buffer and the read buffer, so that
		// some cells fill the pipe and are read in several pieces.
		want := bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*7919)%(96<<10))
		if _, err := pw.Write(want); err != nil {
			t.Fatal(err)
		}
		seg := s.Cut(5 * time.Second)
		if !bytes.Equal(seg.Kept, want) || seg.Truncated || seg.Total != int64(len(want)) {
			t.Fatalf("segment %d: kept %d bytes (want %d), truncated %v, total %d", i, len(seg.Kept), len(want), seg.Truncated, seg.Total)
		}
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("CopyPipe: %v", err)
	}
	if seg := s.Cut(time.Second); len(seg.Kept) != 0 || seg.Total != 0 {
		t.Errorf("after EOF: %+v", seg)
	}
}

// TestCutLimit: the limit is per segment; a truncated segment does not
// truncate the next.
func TestCutLimit(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	s := NewStream(10, nil, nil)
	go s.CopyPipe(pr)
	for i, w := range []string{"0123456789abc", "short", "0123456789", "0123456789x"} {
		if _, err := pw.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
		seg := s.Cut(5 * time.Second)
		want := w[:min(len(w), 10)]
		if string(seg.Kept) != want || seg.Truncated != (len(w) > 10) || seg.Total != int64(len(w)) {
			t.Errorf("segment %d: %q truncated %v total %d; want %q truncated %v total %d",
				i, seg.Kept, seg.Truncated, seg.Total, want, len(w) > 10, len(w))
		}
	}
	if s.Total() != 13+5+10+11 {
		t.Errorf("Total() = %d", s.Total())
	}
}

// TestCutBusyWriter: a writer that never stops does not hold Cut past
// its wait, and no byte is lost or counted twice across segments.
func TestCutBusyWriter(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(1<<30, nil, nil)
	done := make(chan error, 1)
	go func() { done <- s.CopyPipe(pr) }()
	stop := make(chan struct{})
	var written int64
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		defer pw.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			n, err := fmt.Fprintf(pw, "line %d\n", i)
			written += int64(n)
			if err != nil {
				return
			}
		}
	}()
	var got bytes.Buffer
	for range 20 {
		start := time.Now()
		seg := s.Cut(20 * time.Millisecond)
		if d := time.Since(start); d > 10*time.Second { // generous: a loaded host
			t.Errorf("Cut took %v with a wait of 20ms", d)
		}
		got.Write(seg.Kept)
	}
	close(stop)
	<-wdone
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got.Write(s.Cut(time.Second).Kept)
	if int64(got.Len()) != written || s.Total() != written {
		t.Errorf("segments hold %d bytes, Total %d; %d written", got.Len(), s.Total(), written)
	}
}

// TestCutClosed: closing the pipe under CopyPipe ends it without error,
// and Cut returns at once.
func TestCutClosed(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	s := NewStream(10, nil, nil)
	done := make(chan error, 1)
	go func() { done <- s.CopyPipe(pr) }()
	pw.Write([]byte("abc"))
	if seg := s.Cut(5 * time.Second); string(seg.Kept) != "abc" {
		t.Errorf("segment %q", seg.Kept)
	}
	pr.Close()
	if err := <-done; err != nil {
		t.Errorf("CopyPipe after close = %v, want nil", err)
	}
	start := time.Now()
	s.Cut(5 * time.Second)
	if time.Since(start) > time.Second {
		t.Error("Cut waited on an ended stream")
	}
}
