package service

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"
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
type eventStream struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newEventStream(w http.ResponseWriter) *eventStream {
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &eventStream{w: w, rc: http.NewResponseController(w)}
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
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.rc.Flush()
}

// streamWriter is one stream's writer (the supervisor's live writer): a
// write becomes an event. A UTF-8 sequence cut between two writes is held
// back (at most 3 bytes) and sent with the next, so text stays text;
// bytes that are not UTF-8 go as data_base64.
type streamWriter struct {
	name string
	ev   *eventStream
	hold []byte
}

func (s *streamWriter) Write(p []byte) (int, error) {
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
