package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/service"
)

// mcpMain serves the MCP tools over stdin and stdout until the client
// closes stdin (or SIGTERM, SIGINT); then every session it opened is
// closed and the pools torn down before it exits. It returns the exit
// code.
func mcpMain(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "nsbox mcp: "+format+"\n", a...)
		return result.ExitSandboxError
	}
	// Signals first, before other goroutines start (as for serve).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	// A client that went away must not kill the server by SIGPIPE before
	// it has closed its sessions: the write fails, and stdin's end follows.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	defer stop()
	fl, err := parseServeFlags("mcp", args)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := serviceConfig(fl)
	if err != nil {
		return fail("%v", err)
	}
	cfg.Command = "nsbox mcp"
	// Stdout carries the protocol alone: the protocol gets a copy of it,
	// and descriptor 1 becomes stderr, so that nothing else written to
	// stdout (a library's stray print) can corrupt a message.
	outFD, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return fail("duplicate stdout: %v", err)
	}
	if err := unix.Dup3(2, 1, 0); err != nil {
		return fail("point stdout at stderr: %v", err)
	}
	out := os.NewFile(uintptr(outFD), "stdout")
	srv, err := service.New(cfg)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "nsbox mcp: serving MCP over stdio (policies %s)\n", fl.policies)
	if err := srv.ServeMCP(ctx, os.Stdin, out); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(os.Stderr, "nsbox mcp: the client closed the connection; every session is closed")
	return 0
}
