package service

// The workspace files of a session over HTTP: PUT, GET and DELETE of one
// file, and the listing of a directory, through the supervisor's Files.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// files returns the session's workspace, or answers.
func (s *Server) files(w http.ResponseWriter, r *http.Request) *supervisor.Files {
	ss := s.session(w, r)
	if ss == nil {
		return nil
	}
	f, err := sessionFiles(ss)
	if err != nil {
		writeRefusal(w, err)
		return nil
	}
	return f
}

// fileError answers a Files error with its status (fileRefusal).
func fileError(w http.ResponseWriter, err error) {
	writeRefusal(w, fileRefusal(err))
}

// putFile writes the body to the path, creating its missing directories;
// the file is owned by the program. ?mode= gives its permission bits in
// octal (0644 when absent).
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	f := s.files(w, r)
	if f == nil {
		return
	}
	mode := os.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v == 0 || v > 0o777 {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("mode %q: octal permission bits, 1 to 0777", m))
			return
		}
		mode = os.FileMode(v)
	}
	if r.ContentLength > s.cfg.MaxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the file is %d bytes, more than this service accepts (%d)", r.ContentLength, s.cfg.MaxBody))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the file is larger than this service accepts (%d bytes)", s.cfg.MaxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("read the body: %v", err))
		return
	}
	if err := f.WriteFile(r.PathValue("path"), data, mode); err != nil {
		fileError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getFile answers with the file's bytes, at most --max-body of them.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	f := s.files(w, r)
	if f == nil {
		return
	}
	data, err := f.ReadFile(r.PathValue("path"), s.cfg.MaxBody)
	if err != nil {
		fileError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	f := s.files(w, r)
	if f == nil {
		return
	}
	if err := f.Remove(r.PathValue("path")); err != nil {
		fileError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fileList is GET /v1/sessions/{id}/files' answer.
type fileList struct {
	Files []supervisor.FileInfo `json:"files"`
}

// getFiles lists the directory ?dir= of the workspace (its root when
// absent); links are listed, never followed.
func (s *Server) getFiles(w http.ResponseWriter, r *http.Request) {
	f := s.files(w, r)
	if f == nil {
		return
	}
	list, err := f.List(r.URL.Query().Get("dir"))
	if err != nil {
		fileError(w, err)
		return
	}
	if list == nil {
		list = []supervisor.FileInfo{}
	}
	writeJSON(w, http.StatusOK, fileList{Files: list})
}
