// Package output captures one stream (stdout or stderr) of a sandboxed
// program with a byte cap.
//
// The sandboxed program is untrusted: it may write gigabytes. A Stream reads
// the pipe with one fixed buffer, keeps at most its limit, and after the limit
// keeps reading and discarding so the writer never blocks on a full pipe while
// the supervisor kills it. The supervisor's memory therefore stays bounded by
// the limit plus one read buffer, whatever the program writes; and by one
// read buffer and a head when the output is passed on (KeepOnly).
//
// A session's streams are cut into segments, one per cell, each with its
// own limit (segment.go).
package output

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// readBufSize is the size of the one buffer Copy reads into.
const readBufSize = 32 << 10

// firstKeep is the most the kept bytes' first allocation holds. Past it
// they get room for all they may keep at once (see grow).
const firstKeep = 64 << 10

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
	keepMax    int64 // most bytes kept, <= limit
	tee        io.Writer
	onLimit    func()
	onTeeError func(error)

	mu   sync.Mutex
	kept []byte // cap(kept) never exceeds keepMax

	truncated atomic.Bool
	limited   atomic.Bool // onLimit was called
	total     atomic.Int64
	teeErr    atomic.Pointer[error]

	// The current segment (Cut), under mu: base is Total when it began.
	// conn, idle and ended are CopyPipe's: its pipe, whether it found
	// the pipe empty and waits for more, whether it returned.
	base  int64
	conn  syscall.RawConn
	idle  bool
	ended bool
	kick  chan struct{} // a token when idle or ended is set

	// Truncate mode (KeepHeadAndTail), under mu: the first headMax
	// bytes are the head (kept, and teed as they come); every later byte
	// goes through ring, which holds the last limit-headMax of them.
	middle   bool
	name     string // "stdout", for the marker
	headMax  int64
	ring     []byte
	ringPos  int  // where the next byte goes once ring is full
	lastHead byte // the head's last byte, for the marker's line break
}

// NewStream returns a Stream keeping at most limit bytes (a negative limit is
// treated as 0). If tee is non-nil every kept byte is also written to tee as
// it arrives (plain mode passes output through live); bytes past the limit
// are neither kept nor teed. onLimit, if non-nil, is called exactly once, from
// the reading goroutine, when the first byte past the limit arrives.
func NewStream(limit int64, tee io.Writer, onLimit func()) *Stream {
	limit = max(limit, 0)
	return &Stream{limit: limit, keepMax: limit, tee: tee, onLimit: onLimit, kick: make(chan struct{}, 1)}
}

// KeepOnly makes the Stream keep only the first n of the bytes under its
// limit (n is clamped to 0..limit). The limit, the tee and Total are
// unchanged: a stream that is passed on as it arrives needs only a head
// for its record, not a second copy of all it let through. Call it
// before Copy.
func (s *Stream) KeepOnly(n int64) {
	s.keepMax = min(max(n, 0), s.limit)
	if s.middle {
		s.keepMax = min(s.keepMax, s.headMax)
	}
}

// KeepHeadAndTail switches the Stream to truncate mode: past its limit
// the program goes on (no onLimit call), and the Stream keeps the first
// half of the limit (the head) and the last bytes of the stream up to the
// limit (the tail), dropping the middle. Kept and Bytes return the head
// then the tail. A tee gets the head as it arrives and the rest when the
// stream ends: the bytes after the head if the stream fit, otherwise a
// one-line marker naming the stream (name) and how much was left out,
// then the tail. The memory held stays within the limit. Call it before
// KeepOnly and Copy; a segmented stream (Cut) does not use it.
func (s *Stream) KeepHeadAndTail(name string) {
	s.middle, s.name, s.onLimit = true, name, nil
	s.headMax = s.limit / 2
	s.keepMax = min(s.keepMax, s.headMax)
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
			fit := s.take(buf[:n])
			if teeing && len(fit) > 0 {
				if err := writeAll(s.tee, fit); err != nil {
					teeing = false
					firstErr = err
					s.teeErr.Store(&err)
					if s.onTeeError != nil {
						s.onTeeError(err)
					}
				}
			}
		}
		var end error
		switch {
		case rerr == nil && n == 0:
			if empty++; empty < maxEmptyReads {
				continue
			}
			end = io.ErrNoProgress
		case rerr == nil:
			continue
		case isEndOfStream(rerr):
		default:
			end = rerr
		}
		if teeing && s.middle {
			if err := writeAll(s.tee, s.teeRest()); err != nil {
				firstErr = firstNonNil(firstErr, err)
				s.teeErr.Store(&err)
				if s.onTeeError != nil {
					s.onTeeError(err)
				}
			}
		}
		return firstNonNil(firstErr, end)
	}
}

// take records p as seen, keeps what fits under the keep bound, and
// returns the part of p under the limit (what is passed on). It calls
// onLimit the first time a byte is dropped.
func (s *Stream) take(p []byte) []byte {
	if s.middle {
		return s.takeMiddle(p)
	}
	s.mu.Lock()
	seen := s.total.Add(int64(len(p))) - int64(len(p)) - s.base
	fit := p[:max(min(int64(len(p)), s.limit-seen), 0)]
	if room := s.keepMax - int64(len(s.kept)); room > 0 {
		s.kept = grow(s.kept, fit[:min(int64(len(fit)), room)], s.keepMax)
	}
	if len(fit) < len(p) {
		s.truncated.Store(true)
	}
	s.mu.Unlock()
	if len(fit) < len(p) && s.onLimit != nil && s.limited.CompareAndSwap(false, true) {
		s.onLimit()
	}
	return fit
}

// takeMiddle is take in truncate mode: it keeps the head, passes the
// part of p in the head on, and puts the rest through the ring.
func (s *Stream) takeMiddle(p []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := s.total.Add(int64(len(p))) - int64(len(p))
	h := min(max(s.headMax-seen, 0), int64(len(p)))
	head := p[:h]
	if room := s.keepMax - int64(len(s.kept)); room > 0 && h > 0 {
		s.kept = grow(s.kept, head[:min(h, room)], s.keepMax)
	}
	if h > 0 {
		s.lastHead = head[h-1]
	}
	s.pushTail(p[h:])
	if seen+int64(len(p)) > s.limit {
		s.truncated.Store(true)
	}
	return head
}

// pushTail adds p to the ring, which keeps the last limit-headMax bytes.
func (s *Stream) pushTail(p []byte) {
	size := int(s.limit - s.headMax)
	if size <= 0 {
		return
	}
	for len(p) > 0 {
		if len(s.ring) < size {
			n := min(len(p), size-len(s.ring))
			if s.ring == nil {
				s.ring = make([]byte, 0, min(size, firstKeep))
			}
			s.ring = append(s.ring, p[:n]...)
			p = p[n:]
			continue
		}
		if len(p) >= size {
			copy(s.ring, p[len(p)-size:])
			s.ringPos = 0
			return
		}
		n := copy(s.ring[s.ringPos:], p)
		s.ringPos = (s.ringPos + n) % size
		p = p[n:]
	}
}

// tail returns the ring's bytes in order (a new slice); under mu.
func (s *Stream) tail() []byte {
	out := make([]byte, 0, len(s.ring))
	return append(append(out, s.ring[s.ringPos:]...), s.ring[:s.ringPos]...)
}

// teeRest is what a truncate-mode tee gets when the stream ends: the
// bytes after the head, preceded by the marker if some were left out.
func (s *Stream) teeRest() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tail()
	if !s.truncated.Load() {
		return t
	}
	left := s.total.Load() - s.headMax - int64(len(t))
	nl := ""
	if s.total.Load() > 0 && s.headMax > 0 && s.lastHead != '\n' {
		nl = "\n"
	}
	marker := fmt.Sprintf("%s[nsbox: %d bytes of %s left out here: output_limit %d, output_mode truncate]\n", nl, left, s.name, s.limit)
	return append([]byte(marker), t...)
}

// grow appends p to dst, never to a capacity above keep (len(dst)+len(p)
// must be <= keep). A small output gets at most firstKeep bytes; a
// larger one, room for keep bytes at once. Doubling instead would hold
// the old and the new array together at each step (one and a half times
// keep at the last) and leave the old ones for the garbage collector,
// while the one large allocation costs only address space until it is
// written: the runtime takes it from the kernel as fresh, untouched
// pages.
func grow(dst, p []byte, keep int64) []byte {
	need := len(dst) + len(p)
	if need <= cap(dst) {
		return append(dst, p...)
	}
	newCap := keep
	if need <= firstKeep {
		newCap = min(keep, firstKeep)
	}
	grown := make([]byte, len(dst), newCap)
	copy(grown, dst)
	return append(grown, p...)
}

// Bytes returns a copy of the kept bytes.
func (s *Stream) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.middle {
		return append(append([]byte(nil), s.kept...), s.tail()...)
	}
	return append([]byte(nil), s.kept...)
}

// Kept returns the kept bytes themselves, not a copy, for a caller that
// hands them on without copying a possibly large output again. Call it
// only after Copy returned: nothing changes them then.
func (s *Stream) Kept() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.middle && len(s.ring) > 0 {
		return append(append(make([]byte, 0, len(s.kept)+len(s.ring)), s.kept...), s.tail()...)
	}
	return s.kept
}

// TeeError returns the error that stopped teeing, or nil.
func (s *Stream) TeeError() error {
	if e := s.teeErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Truncated reports whether a byte past the limit was seen (in the
// current segment, after a Cut).
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
