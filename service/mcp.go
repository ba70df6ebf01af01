package service

// The service's Model Context Protocol door (docs/mcp.md): tools that a
// model calls to run Python, built on the official Go SDK. `nsbox mcp`
// serves them over stdio (ServeMCP); `nsbox serve` also at /mcp over
// streamable HTTP, behind the same token check as the rest of the API.
// Each tool calls the service's core (core.go), as the HTTP handlers do:
// the same policies, slots, pools, limits and audit rows.
//
// A session opened by a tool belongs to the MCP session that opened it:
// only that MCP session's tools see it, and it is closed when that MCP
// session ends (stdin closed, the HTTP session deleted or expired).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apidoc "github.com/nsbox/nsbox/docs/api"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/session"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// mcpDoor is the MCP server and the sandbox sessions each MCP session
// opened.
type mcpDoor struct {
	s   *Server
	srv *mcp.Server

	mu      sync.Mutex
	clients map[*mcp.ServerSession]*mcpClient
}

// mcpClient is one MCP session's sandbox sessions, by id.
type mcpClient struct {
	mu       sync.Mutex
	sessions map[string]*session.Session
	ended    bool // the MCP session ended: no new sandbox session
}

func newMCPDoor(s *Server) (*mcpDoor, error) {
	d := &mcpDoor{s: s, clients: map[*mcp.ServerSession]*mcpClient{}}
	d.srv = mcp.NewServer(&mcp.Implementation{Name: "nsbox", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: d.instructions(),
	})
	resultSchema, err := resultSchema()
	if err != nil {
		return nil, err
	}
	lim := d.limitsText()
	addTool(d.srv, &mcp.Tool{
		Name:  "run_python",
		Title: "Run Python once",
		Description: "Run a Python 3 program once in a fresh, isolated sandbox and return its result. Nothing " +
			"persists: each call starts from a clean interpreter and an empty /workspace, removed afterwards " +
			"(use create_session and run_cell to keep variables and files between calls). The network is " +
			"off. Output is the program's stdout and stderr (print what you want back), the value of a final " +
			"bare expression, every matplotlib figure left open as a PNG image, and the result object: status (ok, error, timeout, memory_limit, output_limit, policy_violation, killed, " +
			"sandbox_error), exit code, duration and resources. Imports outside the policy's allowlist are " +
			"refused (status policy_violation). " + lim,
		OutputSchema: resultSchema,
	}, d.runPython)
	addTool(d.srv, &mcp.Tool{
		Name:  "create_session",
		Title: "Open a Python session",
		Description: "Open a Python session: one interpreter in one isolated sandbox that keeps its variables, " +
			"imports and /workspace files from one run_cell to the next, like a notebook's kernel. The " +
			"network is off. Returns the session_id the other session tools take. The session ends with " +
			"close_session, after idle_timeout seconds without a cell (default " + fmt.Sprint(DefaultIdleTimeout.Seconds()) + "), when a cell exhausts " +
			"its memory or CPU time, or when this MCP connection ends; nothing of it is kept. Memory, " +
			"processes and CPU time are the session's whole budget; the wall clock is per cell. " + lim,
	}, d.createSession)
	addTool(d.srv, &mcp.Tool{
		Name:  "run_cell",
		Title: "Run a cell in a session",
		Description: "Run Python code as the next cell of a session (create_session first); state from earlier " +
			"cells is there. Returns stdout, stderr, the value of the cell's last expression (as a notebook " +
			"shows it), every matplotlib figure left open as a PNG image (they are then closed), and the " +
			"exception that ended the cell, if any, with the result object. One cell at a time per " +
			"session. A cell past its timeout is interrupted (status timeout) and the session lives on.",
		OutputSchema: resultSchema,
	}, d.runCell)
	addTool(d.srv, &mcp.Tool{
		Name:  "upload_file",
		Title: "Write a file into a session's /workspace",
		Description: "Write a file into a session's /workspace (missing directories are created), for its " +
			"cells to read, e.g. pd.read_csv('/workspace/data.csv'). Give the content as UTF-8 text " +
			"(content) or as base64 (content_base64) for binary data. The path is relative to /workspace; " +
			"absolute paths, '..' and symbolic links are refused. Bounded by the session's workspace size " +
			"and by the service's largest request.",
	}, d.uploadFile)
	addTool(d.srv, &mcp.Tool{
		Name:  "download_file",
		Title: "Read a file from a session's /workspace",
		Description: "Read a file a session's cells wrote in /workspace. A PNG comes back as an image, UTF-8 " +
			"text as text, anything else as base64. The path is relative to /workspace; links are never " +
			"followed.",
	}, d.downloadFile)
	addTool(d.srv, &mcp.Tool{
		Name:        "list_files",
		Title:       "List a session's /workspace",
		Description: "List a directory of a session's /workspace (its top when dir is empty): each entry's path, type (file, dir, symlink, other), size and mode.",
	}, d.listFiles)
	addTool(d.srv, &mcp.Tool{
		Name:         "close_session",
		Title:        "Close a session",
		Description:  "Close a session: a running cell is killed, the sandbox and its /workspace are removed. Returns the session's own result (how its interpreter ended, its CPU time and peak memory).",
		OutputSchema: resultSchema,
	}, d.closeSession)
	return d, nil
}

// resultSchema is the result object's JSON schema, from the API document
// (docs/result.schema.json's copy): run_python, run_cell and
// close_session return that object as their structured content.
func resultSchema() (json.RawMessage, error) {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apidoc.OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("the API document: %w", err)
	}
	s, ok := doc.Components.Schemas["Result"]
	if !ok {
		return nil, errors.New("the API document has no Result schema")
	}
	return s, nil
}

// addTool adds a tool whose arguments decode into In, with In's schema
// (its jsonschema tags describe each argument to the model) and the
// tool's output schema as given. The handler sets the result's content
// and structured content itself: a result object is written by
// result.WriteJSON, exactly as the API and `nsbox run --json` write it.
func addTool[In any](srv *mcp.Server, t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, error)) {
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		res, err := h(ctx, req, in)
		if err != nil {
			return toolError(err), nil, nil
		}
		return res, nil, nil
	})
}

// toolError is a refusal as a tool's error result, which the model
// reads: the API's code and the message.
func toolError(err error) *mcp.CallToolResult {
	msg := err.Error()
	var r *refusal
	if errors.As(err, &r) {
		msg = r.code + ": " + r.msg
	}
	res := &mcp.CallToolResult{}
	res.SetError(errors.New(msg))
	return res
}

// instructions tell the model what the server is for.
func (d *mcpDoor) instructions() string {
	return "nsbox runs untrusted Python in isolated Linux sandboxes with the network off. Use run_python for " +
		"one-off code and charts (nothing persists between calls) and create_session/run_cell for work " +
		"that keeps state or files (upload_file, download_file, list_files); close_session when done. " +
		d.limitsText()
}

// limitsText names the policies offered and their main limits.
func (d *mcpDoor) limitsText() string {
	var b strings.Builder
	b.WriteString("Policies offered (argument policy; default \"" + defaultPolicy + "\"): ")
	for i, name := range d.s.policyNames() {
		p := d.s.cfg.Policies[name]
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s", name)
		if p.Description != "" {
			fmt.Fprintf(&b, " (%s)", strings.TrimSuffix(p.Description, "."))
		}
		l := p.Limits
		fmt.Fprintf(&b, ": at most %s wall clock per run or cell, %s memory, %s output per stream, %s of /workspace",
			l.Timeout, l.Memory, l.OutputLimit, l.WorkspaceSize)
	}
	b.WriteString(".")
	return b.String()
}

// client returns the MCP session's sandbox sessions, watching for its
// end the first time.
func (d *mcpDoor) client(ss *mcp.ServerSession) *mcpClient {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.clients[ss]
	if c == nil {
		c = &mcpClient{sessions: map[string]*session.Session{}}
		d.clients[ss] = c
		go func() {
			_ = ss.Wait() // how it ended does not matter: its sessions end
			d.mu.Lock()
			delete(d.clients, ss)
			d.mu.Unlock()
			d.endClient(c)
		}()
	}
	return c
}

// endClient closes the sandbox sessions an MCP session left open.
func (d *mcpDoor) endClient(c *mcpClient) {
	c.mu.Lock()
	c.ended = true
	open := c.sessions
	c.sessions = map[string]*session.Session{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, ss := range open {
		wg.Go(func() { d.s.closeSession(ss) })
	}
	wg.Wait()
}

// session returns the caller's open session id.
func (d *mcpDoor) session(req *mcp.CallToolRequest, id string) (*session.Session, error) {
	c := d.client(req.Session)
	c.mu.Lock()
	ss := c.sessions[id]
	c.mu.Unlock()
	if ss == nil || d.s.sessions.get(id) == nil {
		return nil, refuse(http.StatusNotFound, "no_session", "no open session %q of this connection (create_session opens one; a session ends with close_session, its idle timeout, or a cell that exhausted its memory or CPU time)", id)
	}
	return ss, nil
}

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

// ServeMCP serves the MCP tools over r and w (nsbox mcp: stdin and
// stdout) until the client closes r or ctx ends; then it ends every
// session and pool, as Shutdown does, and returns. The pools start
// first.
func (s *Server) ServeMCP(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	s.pools.start()
	err := s.mcp.srv.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		err = nil
	}
	s.pools.close()
	s.closeSessions()
	s.closeAudit()
	if err != nil {
		return fmt.Errorf("mcp over stdio: %w", err)
	}
	return nil
}

// mcpHandler is /mcp: streamable HTTP, one MCP session per client,
// closed after idle (its sandbox sessions with it).
func (s *Server) mcpHandler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp.srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      DefaultIdleTimeout,
		MaxRequestBodyBytes: s.cfg.MaxBody,
	})
}

// closeMCP ends every MCP session (the drain): their long-lived HTTP
// streams end, and their sandbox sessions close.
func (s *Server) closeMCP() {
	for ss := range s.mcp.srv.Sessions() {
		go ss.Close()
	}
}
