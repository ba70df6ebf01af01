package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/internal/termsafe"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/service"
)

// clientMain is `nsbox run --server`: nsbox has read the flags and the
// program (handed over as a descriptor) and replaced itself with this.
// It sends the run to the service and prints what a local run prints:
// the program's output as it comes and nsbox's closing line in plain
// mode, the result in --json mode; its exit code is the run's.
func clientMain(args []string) int {
	fs := flag.NewFlagSet("nsbox run --server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	server := fs.String("server", "", "")
	tokenFile := fs.String("token-file", "", "")
	codeFD := fs.Int("code-fd", -1, "")
	stdinFD := fs.Int("stdin-fd", -1, "")
	jsonOut := fs.Bool("json", false, "")
	rawOut := fs.Bool("raw-output", false, "")
	var req struct {
		Code        string            `json:"code"`
		Policy      string            `json:"policy"`
		Timeout     *float64          `json:"timeout,omitempty"`
		OutputLimit *int64            `json:"output_limit,omitempty"`
		Network     string            `json:"network,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		StdinBase64 string            `json:"stdin_base64,omitempty"`
	}
	fs.StringVar(&req.Policy, "policy", "", "")
	fs.StringVar(&req.Network, "network", "", "")
	timeout := fs.Float64("timeout", 0, "")
	outputLimit := fs.Int64("output-limit", 0, "")
	fs.Func("label", "", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("--label %q: not key=value", v)
		}
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		req.Labels[k] = val
		return nil
	})
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "nsbox: --server: %v\n", err)
		return result.ExitSandboxError
	}
	if err := fs.Parse(args); err != nil {
		return fail(err)
	}
	if *timeout > 0 {
		req.Timeout = timeout
	}
	if *outputLimit > 0 {
		req.OutputLimit = outputLimit
	}
	code, err := io.ReadAll(os.NewFile(uintptr(*codeFD), "program"))
	if err != nil {
		return fail(fmt.Errorf("read the program: %w", err))
	}
	req.Code = string(code)
	if *stdinFD >= 0 {
		stdin, err := io.ReadAll(os.NewFile(uintptr(*stdinFD), "stdin"))
		if err != nil {
			return fail(fmt.Errorf("read the program's input: %w", err))
		}
		req.StdinBase64 = base64.StdEncoding.EncodeToString(stdin)
	}
	addr, err := service.ParseAddress(*server)
	if err != nil {
		return fail(err)
	}
	var token []byte
	if *tokenFile != "" {
		if token, err = service.ReadToken(*tokenFile); err != nil {
			return fail(err)
		}
	}
	if addr.Network == "tcp" && token == nil {
		return fail(errors.New("a TCP service needs --token-file (or NSBOX_TOKEN_FILE)"))
	}
	// A signal stops the run on the service (the request is cancelled:
	// the service kills a run whose client went away) and the client
	// reports it as a local run would.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	body, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	base, client := "http://"+addr.Addr, &http.Client{}
	if addr.Network == "unix" {
		base = "http://nsbox"
		client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr.Addr)
		}}
	}
	hreq, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/runs", bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if token != nil {
		hreq.Header.Set("Authorization", "Bearer "+string(token))
	}
	if !*jsonOut {
		hreq.Header.Set("Accept", "application/x-ndjson")
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return fail(fmt.Errorf("%s (%s, HTTP %d)", e.Error.Message, e.Error.Code, resp.StatusCode))
		}
		return fail(fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b)))
	}
	if *jsonOut {
		// The result as the service wrote it: `nsbox run --json`'s bytes.
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fail(fmt.Errorf("read the result: %w", err))
		}
		var r result.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return fail(fmt.Errorf("not a result: %w", err))
		}
		if _, err := os.Stdout.Write(b); err != nil {
			return fail(fmt.Errorf("write result: %w", err))
		}
		return r.ProcessExitCode()
	}
	std := termsafe.NewStdio(*rawOut)
	r, err := printStream(resp.Body, std)
	std.End()
	if err != nil {
		return fail(err)
	}
	// nsbox run's closing line in plain mode (cmd/nsbox/run.go).
	switch {
	case r.Status == result.StatusSandboxError && r.Error != nil:
		fmt.Fprintf(std.Own, "nsbox: %s\n", r.Error.Error())
	case r.Status != result.StatusOK && r.Status != result.StatusError:
		fmt.Fprintf(std.Own, "nsbox: %s: %s\n", r.Status, r.Reason)
	}
	return r.ProcessExitCode()
}

// printStream copies a streamed run's events to std's stdout and stderr
// and returns the result of its last line.
func printStream(body io.Reader, std *termsafe.Stdio) (*result.Result, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev struct {
			Stream     string `json:"stream"`
			Data       string `json:"data"`
			DataBase64 string `json:"data_base64"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("stream line: %w", err)
		}
		if ev.Stream == "" { // the result, last
			var r result.Result
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, fmt.Errorf("not a result: %w", err)
			}
			return &r, nil
		}
		data := []byte(ev.Data)
		if ev.DataBase64 != "" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(ev.DataBase64); err != nil {
				return nil, fmt.Errorf("stream line: %w", err)
			}
		}
		w := std.Out
		if ev.Stream == "stderr" {
			w = std.Err
		}
		if _, err := w.Write(data); err != nil {
			return nil, fmt.Errorf("write %s: %w", ev.Stream, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the stream: %w", err)
	}
	return nil, errors.New("the stream ended without a result")
}
