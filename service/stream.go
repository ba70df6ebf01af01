package service

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nsbox/nsbox/sandbox/result"
)

// ndjson is the media type of a streamed answer: one JSON object per
// line, output events as the program writes, then the result.
const ndjson = "application/x-ndjson"

// wantsStream reports whether the request's Accept header asks for
// ndjson.
func wantsStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == ndjson {
			return true
		}
	}
	return false
}

// streamEvent is one line of output in a streamed answer (StreamEvent):
// data when the bytes are UTF-8, data_base64 otherwise.
type streamEvent struct {
	Stream     string `json:"stream"`
	Data       string `json:"data,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
}

// eventStream writes a streamed answer's lines, from the run's two
// stream readers and then the handler, one at a time, flushing each so
// that the client gets the output as the program writes it.
//
// The status and headers go with the first line, so that a request
// refused before any output (409, 410, 413) is still a JSON error. Once
// the result is written (done) later writes are dropped: the handler has
// returned and the ResponseWriter is no longer its to use.
type eventStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	done    bool
}

func newEventStream(w http.ResponseWriter) *eventStream {
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

// errStreamDone refuses a write after the result.
var errStreamDone = errors.New("the answer is complete")

// began reports whether the answer began (its status is sent).
func (e *eventStream) began() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.started
}

// line writes v as one line (JSON, no HTML escaping, as the result is
// written) and flushes it.
func (e *eventStream) line(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return e.raw(b.Bytes())
}

// raw writes b, one line ending in a newline, and flushes it.
func (e *eventStream) raw(b []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return errStreamDone
	}
	if !e.started {
		e.started = true
		e.w.Header().Set("Content-Type", ndjson)
		e.w.Header().Set("X-Content-Type-Options", "nosniff")
		e.w.WriteHeader(http.StatusOK)
	}
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.rc.Flush()
}

// finish writes the result as the last line; nothing is written after.
func (e *eventStream) finish(r *result.Result) {
	var b bytes.Buffer
	_ = r.WriteJSON(&b)  // a bytes.Buffer does not fail
	_ = e.raw(b.Bytes()) // the client went away: the row has the run
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
}

// streamWriter is one stream's writer (the supervisor's live writer): a
// write becomes an event. A UTF-8 sequence cut between two writes is held
// back (at most 3 bytes) and sent with the next, so text stays text;
// bytes that are not UTF-8 go as data_base64.
type streamWriter struct {
	name string
	ev   *eventStream
	mu   sync.Mutex // a late write from the reader against flush
	hold []byte
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := append(s.hold, p...)
	s.hold = nil
	cut := len(buf)
	// Hold back the start of a sequence that is not complete yet.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	s.hold = append([]byte(nil), buf[cut:]...)
	if err := s.send(buf[:cut]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush sends what is held back, at the end of the stream.
func (s *streamWriter) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hold
	s.hold = nil
	return s.send(h)
}

func (s *streamWriter) send(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	ev := streamEvent{Stream: s.name}
	if utf8.Valid(b) {
		ev.Data = string(b)
	} else {
		ev.DataBase64 = base64.StdEncoding.EncodeToString(b)
	}
	return s.ev.line(ev)
}
