package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// jsonProfile is the file format: the OCI runtime-spec linux.seccomp object
// plus an optional "comment" on the profile and on each rule, so that a
// profile can say why (runc and Docker ignore the extra key). Any other
// unknown key is an error: a misspelt "errnoRet" must not silently become
// the default.
type jsonProfile struct {
	specs.LinuxSeccomp
	Comment string `json:"comment,omitempty"`
	// Shadows LinuxSeccomp.Syscalls (the shallower field wins in
	// encoding/json) to add the comment to each rule.
	Syscalls []jsonRule `json:"syscalls"`
}

type jsonRule struct {
	specs.LinuxSyscall
	Comment string `json:"comment,omitempty"`
}

// ProfileError is a profile that cannot be loaded: it names the file, the
// line when known, the JSON field and what is wrong.
type ProfileError struct {
	Source string // the file, or "seccomp-profiles/NAME.json (built in)"
	Line   int    // 1-based line in Source; 0 if unknown
	Field  string // JSON path of the culprit, e.g. "syscalls[3].names[1]"
	Err    error
}

func (e *ProfileError) Error() string {
	loc := e.Source
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("seccomp profile %s: %v", loc, e.Err)
	}
	return fmt.Sprintf("seccomp profile %s: %s: %v", loc, e.Field, e.Err)
}

func (e *ProfileError) Unwrap() error { return e.Err }

// decodeProfile parses data strictly: unknown keys and anything after the
// profile object are errors, each located by line.
func decodeProfile(source string, data []byte) (*jsonProfile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var jp jsonProfile
	if err := dec.Decode(&jp); err != nil {
		return nil, jsonError(source, data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ProfileError{Source: source, Line: lineAt(data, dec.InputOffset()),
			Err: errors.New("unexpected data after the profile object")}
	}
	return &jp, nil
}

// jsonError locates an encoding/json error in data.
func jsonError(source string, data []byte, err error) error {
	pe := &ProfileError{Source: source, Err: err}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		pe.Err = errors.New("empty file: want a JSON object")
	case errors.As(err, &syn):
		pe.Line = lineAt(data, syn.Offset)
		pe.Err = fmt.Errorf("invalid JSON: %w", err)
	case errors.As(err, &typ):
		pe.Line = lineAt(data, typ.Offset)
		pe.Field = typ.Field
		pe.Err = fmt.Errorf("JSON %s where %s is wanted", typ.Value, typ.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json gives no offset here: find the key itself.
		key := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		pe.Line = lineOfKey(data, key)
		pe.Field = key
		pe.Err = errors.New("unknown key (the format is the OCI runtime-spec linux.seccomp object, plus \"comment\")")
	}
	return pe
}

// ruleLines returns the line where each element of the top-level
// "syscalls" array starts, for error messages. Best effort: data has
// already decoded, so a surprise only shortens the list.
func ruleLines(data []byte) []int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		if t != "syscalls" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil
		}
		var lines []int
		for dec.More() {
			// InputOffset is the end of the previous value: step over the
			// comma and blanks to the element itself.
			off := dec.InputOffset()
			for off < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
				off++
			}
			lines = append(lines, lineAt(data, off))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return lines
			}
		}
		return lines
	}
	return nil
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

// lineOfKey is the line of the first "key": in data, or 0.
func lineOfKey(data []byte, key string) int {
	q, _ := json.Marshal(key)
	for from := 0; ; {
		i := bytes.Index(data[from:], q)
		if i < 0 {
			return 0
		}
		end := from + i + len(q)
		if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 && rest[0] == ':' {
			return lineAt(data, int64(from+i))
		}
		from = end
	}
}

// lineOfString is the line of the first JSON string s at or after line
// fromLine, or fromLine if it is not found.
func lineOfString(data []byte, fromLine int, s string) int {
	start := 0
	for l := 1; l < fromLine && start < len(data); l++ {
		i := bytes.IndexByte(data[start:], '\n')
		if i < 0 {
			break
		}
		start += i + 1
	}
	q, _ := json.Marshal(s)
	if i := bytes.Index(data[start:], q); i >= 0 {
		return lineAt(data, int64(start+i))
	}
	return fromLine
}
