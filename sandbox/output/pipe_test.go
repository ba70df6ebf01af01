package output

import (
	"bytes"
	"os"
	"runtime"
	"testing"
)

// TestConcurrentPoll reads a real pipe while another goroutine polls
// Truncated, Total and Bytes, for the race detector.
func TestConcurrentPoll(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	limited := make(chan struct{})
	s := NewStream(1000, nil, func() { close(limited) })
	done := make(chan error, 1)
	go func() { done <- s.Copy(pr) }()
	go func() {
		defer pw.Close()
		chunk := bytes.Repeat([]byte("y"), 300)
		for range 10 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	for !s.Truncated() {
		_ = s.Total()
		_ = s.Bytes()
		runtime.Gosched()
	}
	<-limited
	if err := <-done; err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if s.Total() != 3000 || len(s.Bytes()) != 1000 {
		t.Errorf("total=%d kept=%d", s.Total(), len(s.Bytes()))
	}
}

// TestClosedPipe checks that closing the read end under Copy ends it cleanly,
// as the supervisor does when it gives up on a stream.
func TestClosedPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	s := NewStream(10, nil, nil)
	done := make(chan error, 1)
	go func() { done <- s.Copy(pr) }()
	if _, err := pw.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	for s.Total() < 3 {
		runtime.Gosched()
	}
	pr.Close()
	if err := <-done; err != nil {
		t.Errorf("Copy after close = %v, want nil", err)
	}
}
