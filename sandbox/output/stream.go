// Package output captures one stream (stdout or stderr) of a sandboxed
// program with a byte cap.
//
// The sandboxed program is untrusted: it may write gigabytes. A Stream reads
// the pipe with one fixed buffer, keeps at most its limit, and after the limit
// keeps reading and discarding so the writer never blocks on a full pipe while
// the supervisor kills it. The supervisor's memory therefore stays bounded by
// the limit plus one read buffer, whatever the program writes.
package output

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// readBufSize is the size of the one buffer Copy reads into.
const readBufSize = 32 << 10

// maxEmptyReads is how many (0, nil) reads in a row Copy tolerates before
// giving up with io.ErrNoProgress, as bufio does, so a broken reader cannot
// spin the supervisor forever.
const maxEmptyReads = 100

// Stream captures at most Limit bytes of a stream.
//
// A Stream is filled by one call to Copy. Bytes, Truncated and Total may be
// called from other goroutines at any time, including while Copy runs.
type Stream struct {
	limit      int64
	tee        io.Writer
	onLimit    func()
	onTeeError func(error)

	mu   sync.Mutex
	kept []byte // cap(kept) never exceeds limit

	truncated atomic.Bool
	total     atomic.Int64
	teeErr    atomic.Pointer[error]
}

// NewStream returns a Stream keeping at most limit bytes (a negative limit is
// treated as 0). If tee is non-nil every kept byte is also written to tee as
// it arrives (plain mode passes output through live); bytes past the limit
// are neither kept nor teed. onLimit, if non-nil, is called exactly once, from
// the reading goroutine, when the first byte past the limit arrives.
func NewStream(limit int64, tee io.Writer, onLimit func()) *Stream {
	return &Stream{limit: max(limit, 0), tee: tee, onLimit: onLimit}
}

// OnTeeError sets f to be called once, from the reading goroutine, when
// writing to the tee fails (the caller closed its end of a pipe, a full
// disk): the output cannot reach whoever asked for it. Call it before
// Copy.
func (s *Stream) OnTeeError(f func(error)) { s.onTeeError = f }

// Limit returns the most bytes the Stream keeps.
func (s *Stream) Limit() int64 { return s.limit }

// Copy reads r until EOF or a read error. EOF, EBADF and "file already
// closed" (the supervisor closed the pipe to stop reading) end the copy
// without error. Past the limit Copy keeps reading and discarding, so the
// writer is never blocked while the supervisor kills it. It returns the first
// tee write error or read error, if any; a tee write error stops teeing but
// not capturing.
func (s *Stream) Copy(r io.Reader) error {
	buf := make([]byte, readBufSize)
	var firstErr error
	teeing := s.tee != nil
	empty := 0
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			empty = 0
			kept := s.keep(buf[:n])
			if teeing && len(kept) > 0 {
				if err := writeAll(s.tee, kept); err != nil {
					teeing = false
					firstErr = err
					s.teeErr.Store(&err)
					if s.onTeeError != nil {
						s.onTeeError(err)
					}
				}
			}
		}
		switch {
		case rerr == nil && n == 0:
			if empty++; empty >= maxEmptyReads {
				return firstNonNil(firstErr, io.ErrNoProgress)
			}
		case rerr == nil:
		case isEndOfStream(rerr):
			return firstErr
		default:
			return firstNonNil(firstErr, rerr)
		}
	}
}

// keep records p as seen, appends the part of it that fits under the limit
// and returns that part. It calls onLimit the first time a byte is dropped.
func (s *Stream) keep(p []byte) []byte {
	s.total.Add(int64(len(p)))
	s.mu.Lock()
	room := s.limit - int64(len(s.kept))
	fit := p
	if int64(len(fit)) > room {
		fit = p[:room]
	}
	s.kept = appendBounded(s.kept, fit, s.limit)
	s.mu.Unlock()
	if len(fit) < len(p) && s.truncated.CompareAndSwap(false, true) && s.onLimit != nil {
		s.onLimit()
	}
	return fit
}

// appendBounded appends p to dst, growing dst geometrically but never to a
// capacity above limit, so a stream never holds more than limit bytes of
// buffer whatever the pattern of reads. len(dst)+len(p) must be <= limit.
func appendBounded(dst, p []byte, limit int64) []byte {
	need := len(dst) + len(p)
	if need <= cap(dst) {
		return append(dst, p...)
	}
	newCap := int64(max(2*cap(dst), need, 4096))
	newCap = min(newCap, limit)
	grown := make([]byte, len(dst), newCap)
	copy(grown, dst)
	return append(grown, p...)
}

// Bytes returns a copy of the kept bytes.
func (s *Stream) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.kept...)
}

// TeeError returns the error that stopped teeing, or nil.
func (s *Stream) TeeError() error {
	if e := s.teeErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Truncated reports whether a byte past the limit was seen.
func (s *Stream) Truncated() bool { return s.truncated.Load() }

// Total returns the number of bytes seen, kept or not.
func (s *Stream) Total() int64 { return s.total.Load() }

// isEndOfStream reports whether err means the stream ended normally: EOF, or
// the read end was closed under Copy (EBADF, os.ErrClosed).
func isEndOfStream(err error) bool {
	return errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EBADF) ||
		errors.Is(err, os.ErrClosed)
}

// writeAll writes p to w, turning a short write into io.ErrShortWrite.
func writeAll(w io.Writer, p []byte) error {
	n, err := w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// firstNonNil returns a if it is non-nil, else b.
func firstNonNil(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
