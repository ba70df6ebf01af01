package output

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Segments: a stream cut into parts, one per cell of a session.
//
// A session's program writes one stdout and one stderr for its whole
// life; what it wrote during a cell belongs to that cell. The cell ends
// with an event on another pipe (the runner's report), which the runner
// writes only after flushing its streams: by then every byte of the
// cell is in the stream's pipe or already read. Cut waits until the
// reader has taken all of it (the pipe is empty and no read is in
// flight) and starts a new segment there. Bytes a background thread or
// process of the program writes after that instant belong to the next
// segment. The limit holds per segment.

// Segment is what a Stream kept of one part of its stream.
type Segment struct {
	Kept      []byte // at most the limit (or KeepOnly's bound)
	Truncated bool   // a byte past the limit was seen and dropped
	Total     int64  // every byte of the segment, kept or not
}

// CopyPipe is Copy for a pipe, reading in a way that Cut can tell when
// the pipe is drained. f must be non-blocking (os.Pipe's ends are).
// Closing f under CopyPipe ends it without error.
func (s *Stream) CopyPipe(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	defer s.setState(func() { s.ended = true })

	buf := make([]byte, readBufSize)
	var firstErr error
	for {
		var n int
		var rerr error
		// The callback runs once at first and again each time the poller
		// says the pipe is readable; returning false waits for that.
		// idle is true only between a read that found the pipe empty and
		// the next attempt, so that every byte read before is taken.
		err := conn.Read(func(fd uintptr) bool {
			s.setState(func() { s.idle = false })
			for {
				n, rerr = unix.Read(int(fd), buf)
				if rerr != unix.EINTR {
					break
				}
			}
			if rerr == unix.EAGAIN {
				s.setState(func() { s.idle = true })
				return false
			}
			return true
		})
		if err != nil { // f was closed under the read
			return firstErr
		}
		if rerr != nil {
			return firstNonNil(firstErr, &os.SyscallError{Syscall: "read", Err: rerr})
		}
		if n == 0 { // EOF: every writer is gone
			return firstErr
		}
		fit := s.take(buf[:n])
		s.mu.Lock()
		tee := s.tee
		s.mu.Unlock()
		if tee != nil && len(fit) > 0 {
			if err := writeAll(tee, fit); err != nil {
				s.mu.Lock()
				if s.tee == tee {
					s.tee = nil
				}
				s.mu.Unlock()
				firstErr = firstNonNil(firstErr, err)
				s.teeErr.Store(&err)
				if s.onTeeError != nil {
					s.onTeeError(err)
				}
			}
		}
	}
}

// SetTee makes a stream filled by CopyPipe pass the bytes it reads from
// now on to w as well (nil: to no one), up to the segment's limit: a
// session's cell streamed to its caller. Every tee write of a segment
// has returned by the time Cut returns it (Cut waits for the reader to
// find the pipe empty, after its last write), so the caller may set the
// next segment's tee then. A tee that fails is dropped.
func (s *Stream) SetTee(w io.Writer) {
	s.mu.Lock()
	s.tee = w
	s.mu.Unlock()
}

// setState changes CopyPipe's state under the lock and wakes a Cut that
// waits for it.
func (s *Stream) setState(change func()) {
	s.mu.Lock()
	change()
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Cut ends the current segment once the stream is drained: CopyPipe has
// taken every byte that was in its pipe, and waits for more (or has
// returned). A stream whose writers keep it busy is cut after wait at
// whatever point its reader reached. It returns the segment, and the
// Stream starts the next one, with its own limit and truncation.
// Cut is for a Stream filled by CopyPipe (started or about to be).
func (s *Stream) Cut(wait time.Duration) Segment {
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		if s.ended || s.idle && pipeEmpty(s.conn) || !time.Now().Before(deadline) {
			seg := Segment{Kept: s.kept, Truncated: s.truncated.Load(), Total: s.total.Load() - s.base}
			s.kept, s.base = nil, s.total.Load()
			s.truncated.Store(false)
			s.mu.Unlock()
			return seg
		}
		s.mu.Unlock()
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-s.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// pipeEmpty reports whether nothing is waiting in the pipe (FIONREAD).
// A pipe that cannot be asked counts as empty: Cut then relies on idle.
func pipeEmpty(conn syscall.RawConn) bool {
	n := 0
	var ierr error
	if err := conn.Control(func(fd uintptr) {
		n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	}); err != nil || errors.Is(ierr, unix.ENOTTY) {
		return true
	}
	return ierr != nil || n == 0
}
