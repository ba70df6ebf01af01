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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apidoc "github.com/nsbox/nsbox/docs/api"
	"github.com/nsbox/nsbox/sandbox/session"
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
