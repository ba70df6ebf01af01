package service

// The MCP tools themselves: each tool's arguments (their JSON Schema is
// made from the struct tags) and its handler, which calls the service's
// core as the HTTP handlers do; and resultContent, a result as a tool's
// answer. mcp.go builds the server and keeps each MCP session's sandbox
// sessions.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

type runPythonArgs struct {
	Code    string   `json:"code" jsonschema:"the Python 3 program to run, as a file's source"`
	Policy  string   `json:"policy,omitempty" jsonschema:"the sandbox policy (see the tool's description); default \"default\""`
	Timeout *float64 `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds, at most the policy's"`
	Stdin   string   `json:"stdin,omitempty" jsonschema:"text the program reads on its standard input (sys.stdin, input()), then end of input; default none"`
}

func (d *mcpDoor) runPython(ctx context.Context, req *mcp.CallToolRequest, in runPythonArgs) (*mcp.CallToolResult, error) {
	rr := runRequest{Code: in.Code, Policy: in.Policy, Timeout: in.Timeout, Labels: map[string]string{"door": "mcp"}}
	if in.Stdin != "" {
		rr.StdinBase64 = base64.StdEncoding.EncodeToString([]byte(in.Stdin))
	}
	res, err := d.s.run(ctx, rr, nil, nil)
	if err != nil {
		return nil, err
	}
	return resultContent(res)
}

type createSessionArgs struct {
	Policy         string   `json:"policy,omitempty" jsonschema:"the sandbox policy (see the tool's description); default \"default\""`
	TimeoutPerCell *float64 `json:"timeout_per_cell,omitempty" jsonschema:"wall-clock limit of each cell in seconds, at most the policy's"`
	IdleTimeout    *float64 `json:"idle_timeout,omitempty" jsonschema:"seconds without a cell after which the session is closed (default: see the tool's description)"`
}

// sessionOpened is create_session's structured content.
type sessionOpened struct {
	SessionID string    `json:"session_id"`
	Policy    string    `json:"policy"`
	Created   time.Time `json:"created"`
}

func (d *mcpDoor) createSession(ctx context.Context, req *mcp.CallToolRequest, in createSessionArgs) (*mcp.CallToolResult, error) {
	c := d.client(req.Session)
	ss, name, err := d.s.openSession(ctx, sessionRequest{
		Policy: in.Policy, TimeoutPerCell: in.TimeoutPerCell, IdleTimeout: in.IdleTimeout,
		Labels: map[string]string{"door": "mcp"},
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.ended { // the connection ended while the session opened
		c.mu.Unlock()
		d.s.closeSession(ss)
		return nil, refuse(http.StatusGone, "session_ended", "the MCP connection ended")
	}
	c.sessions[ss.ID()] = ss
	c.mu.Unlock()
	// Forget it once it ends on its own (idle, a cell that ended it).
	go func() {
		<-ss.Done()
		c.mu.Lock()
		delete(c.sessions, ss.ID())
		c.mu.Unlock()
	}()
	info := ss.Info()
	out := sessionOpened{SessionID: info.ID, Policy: name, Created: info.Created}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("session_id: %s (policy %s)", out.SessionID, name)}},
		StructuredContent: out,
	}, nil
}

type runCellArgs struct {
	SessionID string   `json:"session_id" jsonschema:"the session, from create_session"`
	Code      string   `json:"code" jsonschema:"the Python code of the cell"`
	Timeout   *float64 `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds, at most the session's timeout_per_cell"`
}

func (d *mcpDoor) runCell(ctx context.Context, req *mcp.CallToolRequest, in runCellArgs) (*mcp.CallToolResult, error) {
	ss, err := d.session(req, in.SessionID)
	if err != nil {
		return nil, err
	}
	res, err := d.s.cell(ctx, ss, cellRequest{Code: in.Code, Timeout: in.Timeout}, nil, nil)
	if err != nil {
		return nil, err
	}
	return resultContent(res)
}

type uploadFileArgs struct {
	SessionID     string `json:"session_id" jsonschema:"the session, from create_session"`
	Path          string `json:"path" jsonschema:"where to write it, relative to /workspace, e.g. data/in.csv"`
	Content       string `json:"content,omitempty" jsonschema:"the file's content as UTF-8 text"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's content in base64, for binary data (instead of content)"`
}

// fileWritten is upload_file's structured content.
type fileWritten struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

func (d *mcpDoor) uploadFile(ctx context.Context, req *mcp.CallToolRequest, in uploadFileArgs) (*mcp.CallToolResult, error) {
	ss, err := d.session(req, in.SessionID)
	if err != nil {
		return nil, err
	}
	data := []byte(in.Content)
	if in.ContentBase64 != "" {
		if in.Content != "" {
			return nil, refuse(http.StatusBadRequest, "bad_request", "give content or content_base64, not both")
		}
		if data, err = base64.StdEncoding.DecodeString(in.ContentBase64); err != nil {
			return nil, refuse(http.StatusBadRequest, "bad_request", "content_base64: %v", err)
		}
	}
	if int64(len(data)) > d.s.cfg.MaxBody {
		return nil, refuse(http.StatusRequestEntityTooLarge, "body_too_large", "the file is %d bytes, more than this service accepts (%d)", len(data), d.s.cfg.MaxBody)
	}
	f, err := sessionFiles(ss)
	if err != nil {
		return nil, err
	}
	if err := f.WriteFile(in.Path, data, 0o644); err != nil {
		return nil, fileRefusal(err)
	}
	out := fileWritten{Path: in.Path, Size: len(data)}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("wrote /workspace/%s (%d bytes)", in.Path, len(data))}},
		StructuredContent: out,
	}, nil
}

type fileArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session, from create_session"`
	Path      string `json:"path" jsonschema:"the file, relative to /workspace"`
}

// fileRead is download_file's structured content: content when the file
// is UTF-8, content_base64 otherwise.
type fileRead struct {
	Path          string `json:"path"`
	Size          int    `json:"size"`
	Content       string `json:"content,omitempty"`
	ContentBase64 string `json:"content_base64,omitempty"`
}

func (d *mcpDoor) downloadFile(ctx context.Context, req *mcp.CallToolRequest, in fileArgs) (*mcp.CallToolResult, error) {
	ss, err := d.session(req, in.SessionID)
	if err != nil {
		return nil, err
	}
	f, err := sessionFiles(ss)
	if err != nil {
		return nil, err
	}
	data, err := f.ReadFile(in.Path, d.s.cfg.MaxBody)
	if err != nil {
		return nil, fileRefusal(err)
	}
	out := fileRead{Path: in.Path, Size: len(data)}
	res := &mcp.CallToolResult{StructuredContent: &out}
	switch {
	case bytes.HasPrefix(data, pngMagic):
		out.ContentBase64 = base64.StdEncoding.EncodeToString(data)
		res.Content = []mcp.Content{&mcp.ImageContent{Data: data, MIMEType: result.OutputPNG}}
	case utf8.Valid(data):
		out.Content = string(data)
		res.Content = []mcp.Content{&mcp.TextContent{Text: out.Content}}
	default:
		out.ContentBase64 = base64.StdEncoding.EncodeToString(data)
		res.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d bytes, not text: base64 in content_base64", len(data))}}
	}
	return res, nil
}

// pngMagic opens every PNG file.
var pngMagic = []byte("\x89PNG\r\n\x1a\n")

type listFilesArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session, from create_session"`
	Dir       string `json:"dir,omitempty" jsonschema:"the directory, relative to /workspace; empty for its top"`
}

func (d *mcpDoor) listFiles(ctx context.Context, req *mcp.CallToolRequest, in listFilesArgs) (*mcp.CallToolResult, error) {
	ss, err := d.session(req, in.SessionID)
	if err != nil {
		return nil, err
	}
	f, err := sessionFiles(ss)
	if err != nil {
		return nil, err
	}
	list, err := f.List(in.Dir)
	if err != nil {
		return nil, fileRefusal(err)
	}
	if list == nil {
		list = []supervisor.FileInfo{}
	}
	var b strings.Builder
	for _, fi := range list {
		fmt.Fprintf(&b, "%s\t%s\t%d\t%04o\n", fi.Path, fi.Type, fi.Size, fi.Mode)
	}
	if len(list) == 0 {
		b.WriteString("(empty)\n")
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: b.String()}},
		StructuredContent: fileList{Files: list},
	}, nil
}

type closeSessionArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session, from create_session"`
}

func (d *mcpDoor) closeSession(ctx context.Context, req *mcp.CallToolRequest, in closeSessionArgs) (*mcp.CallToolResult, error) {
	ss, err := d.session(req, in.SessionID)
	if err != nil {
		return nil, err
	}
	final := d.s.closeSession(ss)
	return resultContent(final)
}

// resultContent is a result as a tool's answer: its status, stdout,
// stderr, display outputs (PNG figures as images) and exception as
// content for the model, and the result object itself, as `nsbox run
// --json` prints it, as structured content.
func resultContent(r *result.Result) (*mcp.CallToolResult, error) {
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		return nil, fmt.Errorf("write the result: %w", err)
	}
	// The streams as WriteJSON wrote them (the captured bytes, as UTF-8).
	var streams struct{ Stdout, Stderr string }
	if err := json.Unmarshal(js.Bytes(), &streams); err != nil {
		return nil, fmt.Errorf("read the result back: %w", err)
	}
	status := "status: " + string(r.Status)
	if r.ExitCode != nil {
		status += fmt.Sprintf(" (exit code %d)", *r.ExitCode)
	}
	if r.Reason != "" {
		status += ": " + r.Reason
	}
	if r.Error != nil {
		status += fmt.Sprintf("\nsandbox error at step %s: %s", r.Error.Step, r.Error.Message)
	}
	for _, v := range r.Violations {
		status += "\nrefused by the policy: " + v.Detail
	}
	if r.StdoutTruncated || r.StderrTruncated {
		status += "\n(output truncated at the policy's limit)"
	}
	content := []mcp.Content{&mcp.TextContent{Text: status}}
	if streams.Stdout != "" {
		content = append(content, &mcp.TextContent{Text: "stdout:\n" + streams.Stdout})
	}
	if streams.Stderr != "" && (r.Exception == nil || !strings.Contains(streams.Stderr, r.Exception.Traceback)) {
		content = append(content, &mcp.TextContent{Text: "stderr:\n" + streams.Stderr})
	}
	hasPlain := slices.ContainsFunc(r.Outputs, func(o result.Output) bool { return o.Type == result.OutputText })
	for _, o := range r.Outputs {
		switch {
		case o.Type == result.OutputPNG:
			png, err := base64.StdEncoding.DecodeString(o.Data)
			if err != nil {
				return nil, fmt.Errorf("an image output: %w", err)
			}
			content = append(content, &mcp.ImageContent{Data: png, MIMEType: result.OutputPNG})
		case o.Type == result.OutputText, o.Type == result.OutputHTML && !hasPlain:
			content = append(content, &mcp.TextContent{Text: "output:\n" + o.Data})
		}
	}
	if e := r.Exception; e != nil {
		content = append(content, &mcp.TextContent{Text: "exception: " + e.Name + ": " + e.Value + "\n" + e.Traceback})
	}
	return &mcp.CallToolResult{Content: content, StructuredContent: json.RawMessage(js.Bytes())}, nil
}
