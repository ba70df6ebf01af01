package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/rootfs-builder/resolve"
)

func rootfsLockCommand() *cli.Command {
	return &cli.Command{
		Name:      "lock",
		Usage:     "resolve a requirements list into a hash-pinned, wheels-only lock for `rootfs build --lock`",
		ArgsUsage: "REQUIREMENTS",
		Description: "REQUIREMENTS is a plain list, one package per line (\"pandas\", \"seaborn>=0.13\", extras and markers\n" +
			"allowed), with comments and blank lines; options (-e, -r, --index-url, ...), URLs and paths are refused\n" +
			"with FILE:LINE. uv (`uv pip compile --generate-hashes --only-binary :all:`) resolves it for the root's\n" +
			"interpreter, --python: its Python version and ABI, its glibc (manylinux) and machine, not the host's.\n" +
			"Every package must have a wheel for that target: a package with only a source distribution is refused,\n" +
			"named. The lock (-o) lists every package of the resolution as name==version with the sha256 of the\n" +
			"wheels the target can install (each named in a comment; no source distribution's), is checked as\n" +
			"`rootfs build --lock` checks it, and is written atomically. When LOCK exists,\n" +
			"its pins are kept wherever the list allows (--upgrade ignores them): locking an unchanged list again\n" +
			"gives the same bytes. uv is --uv, else uv on PATH, else .venv-tools/bin/uv beside this binary's\n" +
			"directory (`make tools-venv` in a checkout). uv's own index settings (UV_DEFAULT_INDEX, UV_INDEX,\n" +
			"UV_CACHE_DIR, ...) apply; its configuration files and the settings that change the resolution do not.\n" +
			"\n" +
			"Prints one line, or with --json one object: {\"lock\":LOCK,\"requirements\":FILE,\"target\":{...},\n" +
			"\"packages\":[{\"name\":N,\"version\":V}...],\"changed\":BOOL,\"uv\":PATH,\"elapsed_ms\":MS} or {\"error\":MESSAGE}.\n" +
			"Exit status: 0 locked, 1 failed (the message names the file, line or package).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the lock to write (required)"},
			&cli.StringFlag{Name: "python", Value: resolve.DefaultPython, Usage: "the root's interpreter, whose version, ABI and glibc the lock targets"},
			&cli.StringFlag{Name: "uv", EnvVars: []string{"NSBOX_UV"}, Usage: "the uv to run (default: uv on PATH, then the tools venv)"},
			&cli.StringSliceFlag{Name: "find-links", Usage: "a directory or URL of wheels to use besides the index (repeatable)"},
			&cli.BoolFlag{Name: "no-index", Usage: "use --find-links only, not the package index"},
			&cli.BoolFlag{Name: "offline", Usage: "no network: uv's cache and --find-links only"},
			&cli.BoolFlag{Name: "upgrade", Usage: "ignore the pins of the existing lock: newest versions the list allows"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as one JSON object"},
		},
		Action: rootfsLockAction,
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit("nsbox: rootfs lock: "+err.Error(), exitRootfsFailed)
		},
	}
}

// lockResult is lock's --json object.
type lockResult struct {
	*resolve.Result
	Packages  []lockPackage `json:"packages"`
	ElapsedMS int64         `json:"elapsed_ms"`
}

type lockPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func rootfsLockAction(c *cli.Context) error {
	fail := func(err error) error {
		if c.Bool("json") {
			if werr := json.NewEncoder(c.App.Writer).Encode(map[string]string{"error": err.Error()}); werr != nil {
				return cli.Exit(fmt.Sprintf("nsbox: rootfs lock: %v (and writing it failed: %v)", err, werr), exitRootfsFailed)
			}
			return cli.Exit("", exitRootfsFailed)
		}
		return cli.Exit("nsbox: rootfs lock: "+err.Error(), exitRootfsFailed)
	}
	switch {
	case c.NArg() != 1:
		return fail(fmt.Errorf("lock takes one requirements file, got %q", c.Args().Slice()))
	case c.String("output") == "":
		return fail(fmt.Errorf("-o LOCK is required"))
	}
	self, err := os.Executable()
	if err != nil {
		self = ""
	}
	uv, err := resolve.FindUV(c.String("uv"), self)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := resolve.Lock(ctx, resolve.Options{
		Requirements: c.Args().First(),
		Lock:         c.String("output"),
		Python:       c.String("python"),
		UV:           uv,
		FindLinks:    c.StringSlice("find-links"),
		NoIndex:      c.Bool("no-index"),
		Offline:      c.Bool("offline"),
		Upgrade:      c.Bool("upgrade"),
	})
	if err != nil {
		return fail(err)
	}
	if c.Bool("json") {
		out := lockResult{Result: res, Packages: []lockPackage{}, ElapsedMS: res.Elapsed.Milliseconds()}
		for _, p := range res.Packages {
			out.Packages = append(out.Packages, lockPackage{p.Name, p.Version})
		}
		if err := json.NewEncoder(c.App.Writer).Encode(out); err != nil {
			return fail(fmt.Errorf("write the result: %w", err))
		}
		return nil
	}
	state := "written"
	if !res.Changed {
		state = "unchanged"
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s: %d packages for %s, %s (%.1fs)\n",
		res.Lock, len(res.Packages), res.Target, state, res.Elapsed.Seconds())
	if err != nil {
		return fail(fmt.Errorf("write the result: %w", err))
	}
	return nil
}
