package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/job"
	"github.com/nsbox/nsbox/sandbox/planner"
)

// runRequest is POST /v1/runs' body (docs/api/openapi.json, RunRequest).
type runRequest struct {
	Code         string            `json:"code"`
	Policy       string            `json:"policy"`
	Timeout      *float64          `json:"timeout"`      // seconds; at most the policy's
	OutputLimit  *int64            `json:"output_limit"` // bytes per stream; at most the policy's
	Network      string            `json:"network"`      // "none": no network, even where the policy allows hosts
	Labels       map[string]string `json:"labels"`
	Files        []fileIn          `json:"files"`
	CollectFiles bool              `json:"collect_files"`
	StdinBase64  string            `json:"stdin_base64"` // the program's standard input, base64; then end of input
}

// fileIn is one file placed in the run's workspace.
type fileIn struct {
	Path          string  `json:"path"`
	ContentBase64 string  `json:"content_base64"`
	Mode          *uint32 `json:"mode"` // permission bits; 0644 when absent
}

// defaultPolicy is the policy of a request that names none, as for
// nsbox run.
const defaultPolicy = "default"

// postRun is POST /v1/runs: one run, its result as `nsbox run --json`
// prints it. The answer is 200 with the result whenever the run was
// attempted, refused input included (status sandbox_error, as the
// command line reports it, and a row in the audit log); a request the
// service will not attempt is a JSON error: 400 (not a run request), 403
// (a policy not served), 413 (too large), 429 (too many runs at once).
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > s.cfg.MaxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is %d bytes, more than this service accepts (%d)", r.ContentLength, s.cfg.MaxBody))
		return
	}
	var req runRequest
	if err := decodeBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), &req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is larger than this service accepts (%d bytes)", s.cfg.MaxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if wantsStream(r) {
		// The program's output as events, through the supervisor's live
		// writers (the result then holds the first KiB of each stream,
		// as in plain mode), then the result as the last line. A client
		// that stops reading stops the run (killed, its row finished).
		ev := newEventStream(w)
		stdout, stderr := &streamWriter{name: "stdout", ev: ev}, &streamWriter{name: "stderr", ev: ev}
		res, err := s.run(r.Context(), req, stdout, stderr)
		if err != nil {
			writeRefusal(w, err)
			return
		}
		if stdout.flush() == nil && stderr.flush() == nil {
			ev.finish(res)
		}
		return
	}
	res, err := s.run(r.Context(), req, nil, nil)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = res.WriteJSON(w) // the client went away: the row has the run
}

// decodeBody reads one JSON object into v: unknown fields are refused
// (a misspelt limit must not be silently ignored), and so is anything
// after the object.
func decodeBody(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return errors.New("request body: more than one JSON value")
	}
	return nil
}

// runFlags turns the request's limits into the flags that narrow the
// policy: each positive (the planner refuses one above the policy's). A
// run through the service always returns its display outputs.
func runFlags(req runRequest) (planner.Flags, error) {
	f := planner.Flags{Outputs: true}
	if t := req.Timeout; t != nil {
		if !(*t > 0) || *t*float64(time.Second) > math.MaxInt64 {
			return f, fmt.Errorf("timeout %v: must be a positive number of seconds", *t)
		}
		f.Timeout = time.Duration(*t * float64(time.Second))
	}
	if n := req.OutputLimit; n != nil {
		if *n <= 0 {
			return f, fmt.Errorf("output_limit %d: must be a positive number of bytes", *n)
		}
		f.OutputLimit = *n
	}
	switch req.Network {
	case "":
	case policies.NetworkNone:
		f.NoNetwork = true
	default:
		return f, fmt.Errorf("network %q: only %q turns the policy's network off for this run; nothing widens it", req.Network, policies.NetworkNone)
	}
	return f, nil
}

// decodeFiles turns the request's files into the run's.
func decodeFiles(in []fileIn) ([]job.File, error) {
	var files []job.File
	for _, f := range in {
		data, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			return nil, fmt.Errorf("file %q: content_base64: %w", f.Path, err)
		}
		var mode os.FileMode
		if f.Mode != nil {
			if *f.Mode == 0 || *f.Mode > 0o777 {
				return nil, fmt.Errorf("file %q: mode %#o: permission bits only, 1 to 0777", f.Path, *f.Mode)
			}
			mode = os.FileMode(*f.Mode)
		}
		files = append(files, job.File{Path: f.Path, Data: data, Mode: mode})
	}
	return files, nil
}

// decodeStdin returns the program's standard input of req (nil when none).
func decodeStdin(req runRequest) ([]byte, error) {
	if req.StdinBase64 == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(req.StdinBase64)
	if err != nil {
		return nil, fmt.Errorf("stdin_base64: %w", err)
	}
	return b, nil
}

// runContext is a run's context: cancelled, with the reason the result
// gives, when the client goes away or when the server stops.
func runContext(client, server context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	a := context.AfterFunc(client, func() { cancel(errors.New("the client went away")) })
	b := context.AfterFunc(server, func() { cancel(context.Cause(server)) })
	return ctx, func() {
		a()
		b()
		cancel(nil)
	}
}
